"""Write-only secrets in job payloads: what the API may show, and how a PATCH keeps them.

Pure: no I/O. A secret is a value under a sensitive name (a header, a query parameter, an
env variable, a payload key), a URL's user-info, or a header value carrying its own scheme
(`Bearer ...`, `Basic ...`). Shown as SECRET; a PATCH that sends SECRET back in the same
place keeps the stored value -- but only while the job's kind and target are unchanged (an
http job's scheme, host, port, path, Host header and method, by cronos.secret_bounds; the URLs,
methods, hosts and ports in a task payload), so a caller who may edit a job cannot point it
elsewhere and have Cronos send the secret there. Known secret values are also scrubbed from what a run writes (`scrub`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from cronos.errors import InvalidInput
from cronos.secret_bounds import Place, moved, place_of

SECRET = "***"

_EXACT = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_PARTS = ("token", "secret", "key", "password", "passwd", "pwd", "auth", "cookie", "credential", "session")
# A value that names its own credential scheme is a secret under any header name.
_SCHEMED = re.compile(r"(?:bearer|basic|token|digest)\s+\S", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # a few names, asked about for every run's payload (secret_values)
def is_sensitive(name: str) -> bool:
    lowered = name.lower()
    return lowered in _EXACT or any(part in lowered for part in _PARTS)


def is_hidden(name: str, value: Any) -> bool:
    """Whether the value under `name` is shown as SECRET: by its name, or by its own scheme."""
    return is_sensitive(name) or (isinstance(value, str) and _SCHEMED.match(value) is not None)


# --- URLs -------------------------------------------------------------------------------


def _split_userinfo(netloc: str) -> tuple[str | None, str]:
    userinfo, at, hostport = netloc.rpartition("@")
    return (userinfo, hostport) if at else (None, netloc)


def _redact_userinfo(userinfo: str) -> str:
    user, colon, _password = userinfo.partition(":")
    return f"{user}:{SECRET}" if colon else SECRET  # a lone user name is often a token itself


def _query_pairs(query: str) -> list[tuple[str, str | None]]:
    """Raw (name, value) pairs, order and encoding kept; value None when the pair has no `=`."""
    pairs: list[tuple[str, str | None]] = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        pairs.append((name, value if eq else None))
    return pairs


def _join_pairs(pairs: list[tuple[str, str | None]]) -> str:
    return "&".join(name if value is None else f"{name}={value}" for name, value in pairs)


def redact_url(url: str) -> str:
    """`https://u:pw@h/p?token=x&a=1` -> `https://u:***@h/p?token=***&a=1`; anything else as it was."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL we can take apart: show nothing of it that might be a secret
        return SECRET if "@" in url or "=" in url else url
    userinfo, hostport = _split_userinfo(parts.netloc)
    netloc = parts.netloc if not userinfo else f"{_redact_userinfo(userinfo)}@{hostport}"
    query = parts.query
    if query:
        pairs = _query_pairs(query)
        query = _join_pairs(
            [(n, SECRET if v is not None and is_hidden(unquote(n), unquote(v)) else v) for n, v in pairs]
        )
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


# --- payloads ---------------------------------------------------------------------------


def _redact_tree(value: Any) -> Any:
    """Values under sensitive keys, at any depth of nested objects and lists, become SECRET."""
    if isinstance(value, dict):
        return {k: SECRET if is_hidden(str(k), v) and v is not None else _redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_tree(item) for item in value]
    return value


def _redact_headers(headers: Any) -> Any:
    if not isinstance(headers, dict):
        return headers
    return {name: SECRET if is_hidden(name, value) else value for name, value in headers.items()}


def redact_payload(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A copy of `payload` fit to show: every secret replaced by SECRET."""
    if kind == "http":
        shown = dict(payload)
        if isinstance(shown.get("url"), str):
            shown["url"] = redact_url(shown["url"])
        if "headers" in shown:
            shown["headers"] = _redact_headers(shown["headers"])
        if "body" in shown:
            shown["body"] = _redact_tree(shown["body"])
        return shown
    if kind == "shell":
        shown = dict(payload)
        env = shown.get("env")
        if isinstance(env, dict):
            shown["env"] = {name: SECRET if is_hidden(name, value) else value for name, value in env.items()}
        return shown
    redacted: dict[str, Any] = _redact_tree(payload)
    return redacted


# --- restoring: SECRET sent back in a PATCH ---------------------------------------------

# Why a SECRET cannot be put back (the 422's detail; it never quotes a value).
NOTHING_STORED = "nothing is stored in this place of the job"
KIND_CHANGED = "the job's kind changes, and a secret never follows a job to another kind"
TARGET_CHANGED = (
    "the job's target changes (an http job's scheme, host, port, path, Host header or method; a task payload's "
    "action, URLs, methods, hosts or ports), and a secret never follows a job to a new target"
)
# An http job's 422 names the field that moved its secrets (URL, Host header, method, redirect policy).
SECRETS_MOVED = (
    "changes where the job's secrets go (an http job's scheme, host, port, path, Host header, method or "
    "secrets_follow_redirects): stored secrets are not kept across that change; re-enter them (send each "
    "secret instead of ***) with it"
)
_DEFAULT_METHOD = "POST"  # HttpPayload.method's default
# Keys of a task payload (at any depth) that say where or to what its secrets go.
_TARGET_KEYS = frozenset({"action", "url", "uri", "endpoint", "method", "host", "hostname", "port"})


def _unrestorable(field: str, why: str) -> InvalidInput:
    return InvalidInput(field, f"{SECRET} stands for a stored secret, which is not kept here: {why}; send the secret")


def _url_target(url: str) -> tuple[str, str, str] | None:
    """What a URL's secrets are bound to: its scheme, host and port (as written) and its path."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return parts.scheme.lower(), _split_userinfo(parts.netloc)[1].lower(), parts.path or "/"


def _http_place(payload: Mapping[str, Any]) -> Place | None:
    url = payload.get("url")
    return place_of(url, payload.get("headers")) if isinstance(url, str) else None


def http_move(new: Mapping[str, Any], stored: Mapping[str, Any]) -> str | None:
    """The field of `new` (an http payload) that sends the secrets of `stored` somewhere else, or
    lets them follow redirects where they did not (None: the same target)."""
    if (field := moved(_http_place(stored), _http_place(new))) is not None:
        return field
    if new.get("method", _DEFAULT_METHOD) != stored.get("method", _DEFAULT_METHOD):
        return "$.payload.method"
    if new.get("secrets_follow_redirects") and not stored.get("secrets_follow_redirects"):
        return "$.payload.secrets_follow_redirects"
    return None


def _target_value(value: Any) -> Any:
    if isinstance(value, str):
        target = _url_target(value) if "://" in value else None
        return target if target is not None else value.casefold()
    return value


def task_targets(payload: Any, path: str = "$") -> dict[str, Any]:
    """Where a task payload points, by place: every absolute URL in it (compared as an http job's
    target) and every value under a target key (`action`, `url`, `method`, `host`, `port`, ...).
    Secrets themselves are left out: they are what may be sent back as SECRET."""
    found: dict[str, Any] = {}
    if isinstance(payload, dict):
        for key, value in payload.items():
            here = f"{path}.{key}"
            if is_hidden(str(key), value):
                continue
            if str(key).lower() in _TARGET_KEYS and not isinstance(value, dict | list):
                found[here] = _target_value(value)
            else:
                found |= task_targets(value, here)
    elif isinstance(payload, list):
        for i, item in enumerate(payload):
            found |= task_targets(item, f"{path}[{i}]")
    elif isinstance(payload, str) and "://" in payload and (target := _url_target(payload)) is not None:
        found[path] = target
    return found


def same_target(kind: str, new: Mapping[str, Any], stored: Mapping[str, Any]) -> bool:
    """Whether two payloads of `kind` send to the same target (TARGET_CHANGED says what that is);
    a shell job's secrets are its child's environment: no target."""
    if kind == "http":
        return http_move(new, stored) is None
    if kind == "task":
        return task_targets(new) == task_targets(stored)
    return True


def _restore_url(new: str, stored: str, field: str, why: str | None) -> str:
    if why is None and new == redact_url(stored):
        return stored
    if SECRET not in new:
        return new
    try:
        got, had = urlsplit(new), urlsplit(stored)
    except ValueError:
        return new  # not a URL: the payload check refuses it
    userinfo, hostport = _split_userinfo(got.netloc)
    old_userinfo = _split_userinfo(had.netloc)[0]
    netloc = got.netloc
    if userinfo is not None and SECRET in userinfo.split(":"):
        if why is not None or old_userinfo is None:
            raise _unrestorable(field, why or NOTHING_STORED)
        user, colon, password = userinfo.partition(":")
        old_password = old_userinfo.partition(":")[2]
        if colon and password == SECRET:
            userinfo = f"{user}:{old_password}"
        elif not colon and user == SECRET:
            userinfo = old_userinfo
        netloc = f"{userinfo}@{hostport}"
    stored_values: dict[str, list[str]] = {}
    for name, value in _query_pairs(had.query):
        if value is not None:
            stored_values.setdefault(unquote(name), []).append(value)
    pairs = []
    for name, value in _query_pairs(got.query) if got.query else []:
        if value is not None and unquote(value) == SECRET and is_sensitive(unquote(name)):
            olds = stored_values.get(unquote(name))
            if why is not None or not olds:
                raise _unrestorable(field, why or NOTHING_STORED)
            value = olds.pop(0)
        pairs.append((name, value))
    return urlunsplit(got._replace(netloc=netloc, query=_join_pairs(pairs) if got.query else got.query))


def _restore_tree(new: Any, stored: Any, field: str, why: str | None) -> Any:
    if isinstance(new, dict):
        old = stored if isinstance(stored, dict) else {}
        out = {}
        for key, value in new.items():
            path = f"{field}.{key}"
            if value == SECRET and (is_sensitive(str(key)) or (key in old and is_hidden(str(key), old[key]))):
                if why is not None or key not in old:
                    raise _unrestorable(path, why or NOTHING_STORED)
                out[key] = old[key]
            else:
                out[key] = _restore_tree(value, old.get(key), path, why)
        return out
    if isinstance(new, list):
        olds = stored if isinstance(stored, list) and len(stored) == len(new) else [None] * len(new)
        pairs = enumerate(zip(new, olds, strict=True))
        return [_restore_tree(v, o, f"{field}[{i}]", why) for i, (v, o) in pairs]
    return new


def _restore_headers(new: Any, stored: Any, field: str, why: str | None, *, fold: bool) -> Any:
    """Header (fold=True: names case-insensitive) or env (fold=False) values put back."""
    if not isinstance(new, dict):
        return new
    key = str.lower if fold else str
    old = {key(str(k)): v for k, v in stored.items()} if isinstance(stored, dict) else {}
    out = {}
    for name, value in new.items():
        if value == SECRET:
            had = old.get(key(str(name)))
            if had is not None and is_hidden(str(name), had):
                if why is not None:
                    raise _unrestorable(f"{field}.{name}", why)
                value = had
            elif is_sensitive(str(name)):
                raise _unrestorable(f"{field}.{name}", why or NOTHING_STORED)
        out[name] = value
    return out


def restore_secrets(kind: str, new: dict[str, Any], stored: dict[str, Any], *, stored_kind: str) -> dict[str, Any]:
    """`new` (a payload of `kind`) with each SECRET put back to the stored value it stands for.

    Only within one kind of job (`stored_kind` is the stored payload's), and only while the
    job's target is unchanged: an http job's `http_move`; a task payload's `task_targets`.
    Raises InvalidInput naming the field for a SECRET that may not be put back (saying why; for
    an http job whose target moved, the field that moved it), or that stands for nothing stored.
    """
    if SECRET not in repr(new):  # the common case: nothing to put back
        return new
    why: str | None = None
    if kind != stored_kind:
        why = KIND_CHANGED
    elif not same_target(kind, new, stored):
        why = TARGET_CHANGED
    if kind == "http":
        try:
            return _restore_http(new, stored, why)
        except InvalidInput:
            if why is not TARGET_CHANGED:
                raise
            raise InvalidInput(http_move(new, stored) or "$.payload", SECRETS_MOVED) from None
    if kind == "shell":
        restored = dict(new)
        if "env" in new:
            restored["env"] = _restore_headers(new["env"], stored.get("env"), "$.payload.env", why, fold=False)
        return restored
    result: dict[str, Any] = _restore_tree(new, stored, "$.payload", why)
    return result


def _restore_http(new: dict[str, Any], stored: dict[str, Any], why: str | None) -> dict[str, Any]:
    restored = dict(new)
    new_url, old_url = new.get("url"), stored.get("url")
    if isinstance(new_url, str):
        restored["url"] = _restore_url(new_url, old_url if isinstance(old_url, str) else "", "$.payload.url", why)
    if "headers" in new:
        restored["headers"] = _restore_headers(new["headers"], stored.get("headers"), "$.payload.headers", why,
                                               fold=True)  # fmt: skip
    if "body" in new:
        restored["body"] = _restore_tree(new["body"], stored.get("body"), "$.payload.body", why)
    return restored


# --- scrubbing: known secret values out of what a run writes ------------------------------

# Shorter values ("1", "eu", "yes") would mangle ordinary text wherever they appear: not scrubbed.
MIN_SCRUB_CHARS = 4


def _leaves(value: Any, found: set[str]) -> None:
    """Every scalar in a hidden value, as text; a schemed credential's token on its own too."""
    if isinstance(value, str):
        found.add(value)
        if _SCHEMED.match(value):
            found.add(value.split(None, 1)[1])
    elif isinstance(value, dict):
        for item in value.values():
            _leaves(item, found)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, found)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        found.add(str(value))


def _tree_secrets(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if is_hidden(str(key), item):
                _leaves(item, found)
            else:
                _tree_secrets(item, found)
    elif isinstance(value, list):
        for item in value:
            _tree_secrets(item, found)


def _url_secrets(url: str, found: set[str]) -> None:
    try:
        parts = urlsplit(url)
    except ValueError:
        found.add(url)  # redact_url shows none of it either
        return
    userinfo = _split_userinfo(parts.netloc)[0]
    if userinfo:
        user, colon, password = userinfo.partition(":")
        found.update((password, unquote(password)) if colon else (user, unquote(user)))
    for name, value in _query_pairs(parts.query) if parts.query else []:
        if value is not None and is_hidden(unquote(name), unquote(value)):
            found.update((value, unquote(value)))


def _written_forms(value: str) -> set[str]:
    """`value` as it may appear in text: as is, JSON-escaped (ASCII or not; and JSON in a JSON
    string, as an echoed JSON body in a JSON reply) and repr-escaped."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    twice = json.dumps(escaped, ensure_ascii=False)[1:-1]
    return {value, json.dumps(value)[1:-1], escaped, twice, repr(value)[1:-1]}


def secret_values(kind: str, payload: Mapping[str, Any]) -> tuple[str, ...]:
    """Every value `redact_payload` hides in a payload of `kind`, in every form it may be written
    in, longest first (for `scrub`); values shorter than MIN_SCRUB_CHARS are left out."""
    found: set[str] = set()
    if kind == "http":
        if isinstance(url := payload.get("url"), str):
            _url_secrets(url, found)
        if isinstance(headers := payload.get("headers"), dict):
            for name, value in headers.items():
                if is_hidden(str(name), value):
                    _leaves(value, found)
        _tree_secrets(payload.get("body"), found)
    elif kind == "shell":
        if isinstance(env := payload.get("env"), dict):
            for name, value in env.items():
                if is_hidden(str(name), value):
                    _leaves(value, found)
    else:
        _tree_secrets(payload, found)
    forms = {form for value in found if len(value) >= MIN_SCRUB_CHARS for form in _written_forms(value)}
    forms.discard(SECRET)
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def scrub(text: str, values: tuple[str, ...]) -> str:
    """`text` with every one of `values` (from secret_values: longest first) replaced by SECRET."""
    for value in values:
        if value in text:
            text = text.replace(value, SECRET)
    return text
