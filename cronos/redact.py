"""Write-only secrets in job payloads: what the API may show, and how a PATCH keeps them.

Pure: no I/O. A secret is a value under a sensitive name (a header, a query parameter, an
env variable, a payload key), a URL's user-info, or a header value carrying its own scheme
(`Bearer ...`, `Basic ...`). Shown as SECRET; a PATCH that sends SECRET back in the same
place keeps the stored value -- but only while the http target's origin is unchanged, so a
caller who may edit a job cannot point it elsewhere and have Cronos send the secret there.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from cronos.errors import InvalidInput

SECRET = "***"

_EXACT = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_PARTS = ("token", "secret", "key", "password", "passwd", "pwd", "auth", "cookie", "credential", "session")
# A value that names its own credential scheme is a secret under any header name.
_SCHEMED = re.compile(r"(?:bearer|basic|token|digest)\s+\S", re.IGNORECASE)


def is_sensitive(name: str) -> bool:
    lowered = name.lower()
    return lowered in _EXACT or any(part in lowered for part in _PARTS)


def _hidden(name: str, value: Any) -> bool:
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
        query = _join_pairs([(n, SECRET if v is not None and _hidden(unquote(n), unquote(v)) else v) for n, v in pairs])
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _origin(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts.scheme.lower(), _split_userinfo(parts.netloc)[1].lower()


def _restore_url(new: str, stored: str, field: str) -> str:
    if new == redact_url(stored):
        return stored
    if SECRET not in new:
        return new
    try:
        got, had = urlsplit(new), urlsplit(stored)
    except ValueError:
        return new  # not a URL: the payload check refuses it
    same_origin = _origin(new) == _origin(stored)
    userinfo, hostport = _split_userinfo(got.netloc)
    old_userinfo = _split_userinfo(had.netloc)[0]
    netloc = got.netloc
    if userinfo is not None and SECRET in userinfo.split(":"):
        if not same_origin or old_userinfo is None:
            raise _unrestorable(field)
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
            if not same_origin or not olds:
                raise _unrestorable(field)
            value = olds.pop(0)
        pairs.append((name, value))
    return urlunsplit(got._replace(netloc=netloc, query=_join_pairs(pairs) if got.query else got.query))


def _unrestorable(field: str) -> InvalidInput:
    return InvalidInput(
        field,
        f"{SECRET} stands for the stored secret, which is kept only in the same place of the same "
        "job while the URL's scheme, host and port are unchanged; send the secret itself",
    )


# --- payloads ---------------------------------------------------------------------------


def _redact_tree(value: Any) -> Any:
    """Values under sensitive keys, at any depth of nested objects and lists, become SECRET."""
    if isinstance(value, dict):
        return {k: SECRET if _hidden(str(k), v) and v is not None else _redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_tree(item) for item in value]
    return value


def _restore_tree(new: Any, stored: Any, field: str, *, allowed: bool) -> Any:
    if isinstance(new, dict):
        old = stored if isinstance(stored, dict) else {}
        out = {}
        for key, value in new.items():
            path = f"{field}.{key}"
            if value == SECRET and (is_sensitive(str(key)) or (key in old and _hidden(str(key), old[key]))):
                if not allowed or key not in old:
                    raise _unrestorable(path)
                out[key] = old[key]
            else:
                out[key] = _restore_tree(value, old.get(key), path, allowed=allowed)
        return out
    if isinstance(new, list):
        olds = stored if isinstance(stored, list) and len(stored) == len(new) else [None] * len(new)
        pairs = enumerate(zip(new, olds, strict=True))
        return [_restore_tree(v, o, f"{field}[{i}]", allowed=allowed) for i, (v, o) in pairs]
    return new


def _redact_headers(headers: Any) -> Any:
    if not isinstance(headers, dict):
        return headers
    return {name: SECRET if _hidden(name, value) else value for name, value in headers.items()}


def _restore_headers(new: Any, stored: Any, field: str, *, allowed: bool, fold: bool) -> Any:
    """Header (fold=True: names case-insensitive) or env (fold=False) values put back."""
    if not isinstance(new, dict):
        return new
    key = str.lower if fold else str
    old = {key(str(k)): v for k, v in stored.items()} if isinstance(stored, dict) else {}
    out = {}
    for name, value in new.items():
        if value == SECRET:
            had = old.get(key(str(name)))
            if had is not None and _hidden(str(name), had):
                if not allowed:
                    raise _unrestorable(f"{field}.{name}")
                value = had
            elif is_sensitive(str(name)):
                raise _unrestorable(f"{field}.{name}")
        out[name] = value
    return out


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
            shown["env"] = {name: SECRET if _hidden(name, value) else value for name, value in env.items()}
        return shown
    redacted: dict[str, Any] = _redact_tree(payload)
    return redacted


def restore_secrets(kind: str, new: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """`new` with each SECRET put back to the stored value it stands for.

    Raises InvalidInput (naming the field) for a SECRET that stands for nothing stored, or
    for an http job whose URL origin changed: the stored secrets belong to the old target.
    """
    if SECRET not in repr(new):  # the common case: nothing to put back
        return new
    if kind == "http":
        restored = dict(new)
        new_url, old_url = new.get("url"), stored.get("url")
        allowed = isinstance(new_url, str) and isinstance(old_url, str) and _origin(new_url) == _origin(old_url)
        if isinstance(new_url, str):
            restored["url"] = _restore_url(new_url, old_url if isinstance(old_url, str) else "", "$.payload.url")
        if "headers" in new:
            restored["headers"] = _restore_headers(
                new["headers"], stored.get("headers"), "$.payload.headers", allowed=allowed, fold=True
            )
        if "body" in new:
            restored["body"] = _restore_tree(new["body"], stored.get("body"), "$.payload.body", allowed=allowed)
        return restored
    if kind == "shell":
        restored = dict(new)
        if "env" in new:
            restored["env"] = _restore_headers(new["env"], stored.get("env"), "$.payload.env", allowed=True, fold=False)
        return restored
    result: dict[str, Any] = _restore_tree(new, stored, "$.payload", allowed=True)
    return result
