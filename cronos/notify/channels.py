"""A notification channel: what a client sets, how it is checked, shown and stored. Pure.

Kinds: `webhook` (a URL, requests signed per Standard Webhooks with the channel's secret),
`slack` (a Slack-compatible incoming-webhook URL), `email` (an SMTP server and addresses).
Secrets are write-only (as cronos.redact does for jobs): the webhook's signing `secret`, the
Slack `url` (the URL is the credential) and the SMTP `password` are shown as `***`, and `***`
sent back in a PATCH keeps the stored value -- the SMTP password only while the server and user
are unchanged (it never follows a channel to another server). A webhook URL's own credentials
(user-info, a `token=` query) are redacted as a job's are; to a reader that is not an admin, its
path and query are `***` too (they often hold a token).
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, time
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from cronos.errors import InvalidInput
from cronos.models import QUEUE_PATTERN
from cronos.netguard import literal_host_refusal
from cronos.notify.mail import address_problem
from cronos.notify.rules import EVENT_KINDS, QuietHours, Rule
from cronos.payloads import URL_PATTERN, url_problem
from cronos.redact import SECRET, redact_url
from cronos.selectors import SELECTOR_PATTERN, parse
from cronos.webhooks import SECRET_PREFIX

ChannelKind = Literal["webhook", "slack", "email"]
EventKind = Literal[
    "failed", "recovered", "missed", "late_start", "overran", "too_fast", "no_success", "skipped", "cancelled",
    "paused_by_breaker", "canary_by_breaker", "resumed_by_breaker", "started", "completed", "ended",
]  # fmt: skip
assert set(EventKind.__args__) == set(EVENT_KINDS)  # type: ignore[attr-defined]  # one list of kinds

Name = Annotated[
    str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", description="1-100 letters, digits, '.', '_', '-'")
]
Url = Annotated[
    str,
    msgspec.Meta(
        pattern=URL_PATTERN, max_length=4096,
        description="an address-literal host in a refused range (unless in CRONOS_HTTP_ALLOW_NETS) or localhost is "
        "refused; names are checked after resolution, when sending",
    ),
]  # fmt: skip
# In a PATCH: `***` keeps the stored URL (a Slack URL is always shown so).
UrlOrStars = Annotated[str, msgspec.Meta(pattern=rf"{URL_PATTERN}|^\*\*\*$", max_length=4096)]
# No space, control character or line separator (spelled out: Python's \s and JSON Schema's differ);
# what else an email cannot carry intact (an encoded word, a comment) is refused when saved (mail.py).
_ADDRESS_PART = r"[^@\x00-\x20\x7f-\x9f\u2028\u2029<>,;]+"
Address = Annotated[
    str,
    msgspec.Meta(
        pattern=f"^{_ADDRESS_PART}@{_ADDRESS_PART}$", max_length=254,
        description="an address an email carries as it is (no comment, no encoded word)",
    ),
]  # fmt: skip
Clock = Annotated[str, msgspec.Meta(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$", description="HH:MM, 24 h")]
Queue = Annotated[str, msgspec.Meta(pattern=QUEUE_PATTERN)]
JobId = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]


class Smtp(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An SMTP server: `starttls` (default, port 587), `ssl` (implicit TLS, 465) or `none`."""

    host: Annotated[
        str, msgspec.Meta(min_length=1, max_length=253, pattern=r"^[^\x00-\x20\x7f/@:]+$|^\[[0-9a-fA-F:.]+\]$")
    ]
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 587
    security: Literal["starttls", "ssl", "none"] = "starttls"
    user: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    password: Annotated[str, msgspec.Meta(max_length=1024, description="write-only (***); used with `user`")] | None = (
        None
    )
    sender: Address = msgspec.field(name="from")
    to: Annotated[list[Address], msgspec.Meta(min_length=1, max_length=50)]


class Quiet(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """No notification between `start` and `end` (wall clock in `timezone`; 22:00-07:00 wraps
    midnight): held until `end` (`hold`, the default) or dropped."""

    start: Clock
    end: Clock
    timezone: Annotated[str, msgspec.Meta(max_length=64, extra_json_schema={"format": "iana-time-zone"})] = "UTC"
    hold: bool = True


_EVENTS_META = msgspec.Meta(
    min_length=1, max_length=len(EVENT_KINDS), description="the job events it hears of, each once",
    extra_json_schema={"uniqueItems": True},
)  # fmt: skip


Jobs = Annotated[list[JobId], msgspec.Meta(max_length=1000, description="only these jobs (ids)")]
Queues = Annotated[list[Queue], msgspec.Meta(max_length=100, description="only the jobs of these queues")]
Selector = Annotated[
    str,
    msgspec.Meta(
        min_length=1, max_length=1000, pattern=SELECTOR_PATTERN,
        description="also the jobs whose labels match this selector (team=data,env!=dev; docs/labels.md)",
    ),
]  # fmt: skip
Events = Annotated[list[EventKind], _EVENTS_META]
AfterFailures = Annotated[int, msgspec.Meta(ge=1, le=1000, description="failed: only after N in a row")]
RateLimit = Annotated[int, msgspec.Meta(ge=0, le=30 * 86_400, description="at most one per job per (s; 0: off)")]


class _Rule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What every kind of channel has: a name, what it applies to (every job unless `jobs`,
    `queues` or `selector` name some), the events it hears of and its rules."""

    name: Name
    jobs: Jobs | None = None
    queues: Queues | None = None
    selector: Selector | None = None
    events: Events = msgspec.field(default_factory=lambda: ["failed", "recovered", "missed"])  # rules.DEFAULT_EVENTS
    after_failures: AfterFailures = 1
    rate_limit_s: RateLimit = 0
    quiet_hours: Quiet | None = None
    enabled: bool = True


_SECRET_META = msgspec.Meta(
    # 18-66 bytes: 6-22 whole groups, or 6-21 and a padded one (22 and a padded one would be 67-68).
    pattern=r"^whsec_(?:(?:[A-Za-z0-9+/]{4}){6,22}|(?:[A-Za-z0-9+/]{4}){6,21}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=))$",
    description="whsec_ + base64 of 18-66 bytes; write-only; default: 32 random bytes drawn",
)


Secret = Annotated[str, _SECRET_META]
SecretOrStars = Annotated[str, msgspec.Meta(pattern=rf"{_SECRET_META.pattern}|^\*\*\*$")]


class WebhookChannel(_Rule, tag="webhook", tag_field="kind"):
    """POST the notification as JSON to `url`, signed per Standard Webhooks with `secret`."""

    url: Url
    secret: Secret | None = None


class SlackChannel(_Rule, tag="slack", tag_field="kind"):
    """POST {"text": ...} to a Slack-compatible incoming-webhook `url` (write-only: it is the credential)."""

    url: Url


class EmailChannel(_Rule, tag="email", tag_field="kind"):
    """Email through an SMTP server."""

    smtp: Smtp


# What a client sends to create a channel: one of the kinds, by `kind`.
ChannelIn = WebhookChannel | SlackChannel | EmailChannel


class ChannelFields(_Rule, kw_only=True):
    """A channel of any kind, flat (as stored and shown): `url` for webhook and slack, `secret` for
    webhook, `smtp` for email."""

    kind: ChannelKind
    url: str | None = None
    secret: str | None = None
    smtp: Smtp | None = None


def flat(body: WebhookChannel | SlackChannel | EmailChannel) -> ChannelFields:
    fields = msgspec.structs.asdict(body)
    kind = {WebhookChannel: "webhook", SlackChannel: "slack", EmailChannel: "email"}[type(body)]
    return ChannelFields(kind=kind, **fields)  # type: ignore[arg-type]


def tagged(fields: ChannelFields) -> dict[str, Any]:
    """The flat fields as the kind's body (for validation as ChannelIn): the other kinds' fields left out."""
    out = msgspec.to_builtins(fields)
    keep = {"webhook": ("url", "secret"), "slack": ("url",), "email": ("smtp",)}[fields.kind]
    for name in ("url", "secret", "smtp"):
        if name not in keep or out.get(name) is None:
            out.pop(name, None)
    return dict(out)


class Channel(ChannelFields, kw_only=True):
    id: int
    created_at: datetime
    updated_at: datetime
    namespace: str = "default"  # it hears only of its namespace's jobs (issue 41)


def new_secret(random_bytes: bytes) -> str:
    """A signing secret as Standard Webhooks writes them: whsec_ + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(random_bytes).decode("ascii")


def _check_url(url: str | None, field: str, allow: tuple[str, ...]) -> None:
    if url is None:
        raise InvalidInput(field, "required for this kind of channel")
    if (problem := url_problem(url)) is not None:
        raise InvalidInput(field, problem)
    why = literal_host_refusal(url, allow)
    if why is not None:
        raise InvalidInput(field, f"refused by the SSRF guard: {why}")


def _check_clock(text: str) -> time:
    return time(int(text[:2]), int(text[3:]))


def check(fields: ChannelFields, allow: tuple[str, ...]) -> None:
    """Raise InvalidInput naming the field for what the shape alone does not refuse."""
    if fields.kind in ("webhook", "slack"):
        if fields.url != SECRET:
            _check_url(fields.url, "$.url", allow)
        if fields.smtp is not None:
            raise InvalidInput("$.smtp", f"only for an email channel, not a {fields.kind} one")
    if fields.kind == "webhook" and fields.secret not in (None, SECRET):
        key = fields.secret.removeprefix(SECRET_PREFIX)
        try:
            raw = base64.b64decode(key + "==", validate=False)
        except (binascii.Error, ValueError):
            raw = b""
        if not fields.secret.startswith(SECRET_PREFIX) or not 18 <= len(raw) <= 66:
            raise InvalidInput("$.secret", "must be whsec_ + base64 of 18 to 66 bytes (or leave it out: one is drawn)")
    if fields.kind != "webhook" and fields.secret is not None:
        raise InvalidInput("$.secret", "only a webhook channel has a signing secret")
    if fields.kind == "email":
        if fields.smtp is None:
            raise InvalidInput("$.smtp", "required for an email channel")
        if fields.url is not None:
            raise InvalidInput("$.url", "an email channel has no URL: give `smtp`")
        why = literal_host_refusal(f"smtp://{fields.smtp.host}", allow)
        if why is not None:
            raise InvalidInput("$.smtp.host", f"refused by the SSRF guard: {why}")
        addresses = [
            ("$.smtp.from", fields.smtp.sender),
            *((f"$.smtp.to[{i}]", a) for i, a in enumerate(fields.smtp.to)),
        ]
        for field, address in addresses:  # refused now, not on every send
            if (problem := address_problem(address)) is not None:
                raise InvalidInput(field, problem)
    if fields.selector is not None:
        parse(fields.selector, "$.selector")
    if len(set(fields.events)) != len(fields.events):
        raise InvalidInput("$.events", "names an event twice")
    if fields.quiet_hours is not None:
        try:
            ZoneInfo(fields.quiet_hours.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput("$.quiet_hours.timezone", "not an IANA time zone") from None


def masked_url(url: str) -> str:
    """A webhook URL as any reader may see it: where it goes (scheme, host, port), not its path or
    query, which often carry a token (`/hooks/T0/B0/XXXX`, `?key=...`)."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return SECRET
    rest = f"/{SECRET}" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return urlunsplit((parts.scheme, host, rest, "", ""))


def shown(channel: Channel, *, admin: bool) -> Channel:
    """The channel fit to show: every secret `***`; a webhook URL's path and query too unless to an
    admin (who sets them; others only read)."""
    smtp = channel.smtp
    if smtp is not None and smtp.password is not None:
        smtp = msgspec.structs.replace(smtp, password=SECRET)
    url = channel.url
    if url is not None:
        url = SECRET if channel.kind == "slack" else redact_url(url) if admin else masked_url(url)
    secret = None if channel.secret is None else SECRET
    return msgspec.structs.replace(channel, url=url, secret=secret, smtp=smtp)


def restore(new: ChannelFields, stored: Channel) -> ChannelFields:
    """`new` with each `***` put back to the stored secret it stands for (InvalidInput when it may not)."""
    url, secret, smtp = new.url, new.secret, new.smtp
    if url is not None and SECRET in url:
        # `***`, or the URL as an admin or another reader sees it: the stored URL (none for email).
        as_shown = (SECRET, shown(stored, admin=True).url, shown(stored, admin=False).url)
        if new.kind != stored.kind or url not in as_shown:
            raise InvalidInput("$.url", f"{SECRET} stands for a stored secret, which is not kept here; send the URL")
        url = stored.url
    if secret == SECRET and new.kind == "webhook":
        if stored.secret is None:
            raise InvalidInput("$.secret", f"{SECRET} stands for a stored secret, and none is stored")
        secret = stored.secret
    if smtp is not None and smtp.password == SECRET:
        old = stored.smtp
        if old is None or old.password is None:
            raise InvalidInput("$.smtp.password", f"{SECRET} stands for a stored secret, and none is stored")
        if (smtp.host.lower(), smtp.port, smtp.user) != (old.host.lower(), old.port, old.user):
            raise InvalidInput(
                "$.smtp.password",
                f"{SECRET} stands for the stored password, which never follows a channel to another server or "
                "user; send the password",
            )
        smtp = msgspec.structs.replace(smtp, password=old.password)
    return msgspec.structs.replace(new, url=url, secret=secret, smtp=smtp)


# --- storage: what is shown (`config`) apart from what is not (`secrets`) ---------------


def split(fields: ChannelFields) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, secrets) as the table keeps them."""
    config: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    if fields.kind == "webhook":
        config["url"] = fields.url
        if fields.secret is not None:
            secrets["secret"] = fields.secret
    elif fields.kind == "slack":
        secrets["url"] = fields.url
    elif fields.smtp is not None:
        smtp = msgspec.to_builtins(fields.smtp)
        password = smtp.pop("password", None)
        config["smtp"] = smtp
        if password is not None:
            secrets["password"] = password
    return config, secrets


def join(row: dict[str, Any]) -> dict[str, Any]:
    """A table row (config and secrets apart) as Channel's fields."""
    config, secrets = row.pop("config") or {}, row.pop("secrets") or {}
    row["url"] = secrets.get("url", config.get("url"))
    row["secret"] = secrets.get("secret")
    smtp = config.get("smtp")
    if smtp is not None:
        smtp = {**smtp, "password": secrets.get("password")}
    row["smtp"] = smtp
    row["jobs"], row["queues"] = row.pop("job_ids"), row["queues"]
    return row


def rule(channel: Channel) -> Rule:
    quiet = channel.quiet_hours
    return Rule(
        channel_id=channel.id,
        job_ids=None if channel.jobs is None else frozenset(channel.jobs),
        queues=None if channel.queues is None else frozenset(channel.queues),
        selector=None if channel.selector is None else parse(channel.selector, "$.selector"),
        events=frozenset(channel.events),
        after_failures=channel.after_failures,
        rate_limit_s=channel.rate_limit_s,
        quiet_hours=None
        if quiet is None
        else QuietHours(_check_clock(quiet.start), _check_clock(quiet.end), quiet.timezone, quiet.hold),
        enabled=channel.enabled,
        namespace=channel.namespace,
    )
