"""A notification as an email: headers no job name or address can steer. Pure.

Python's email package decodes RFC 2047 encoded words when a header is set, so a job named
`=?utf-8?q?x=0D=0AReply-To:...?=` once became a second header and a body of its author's choosing;
and a header value holding U+2028 (a line break to `str.splitlines`) made every email of the job
fail. So: the subject shows the name as one literal line (line breaks and other spaces as a space,
`=?` split so nothing in it decodes), every header is set through a policy that refuses a value
which decodes to a line break or carries a defect, and the finished message is parsed back and
must hold exactly the headers set. An address the email cannot carry intact is refused when the
channel is saved (`address_problem`, applied by cronos.notify.channels).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from email import errors
from email import policy as policies
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import EmailPolicy
from email.utils import format_datetime
from typing import Any

import msgspec

from cronos.notify.message import one_line

FALLBACK_DOMAIN = "cronos.invalid"  # a Message-ID's domain when the sender's has no ASCII form
_ENCODED_WORD = re.compile(r"=\?")
_BREAK = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_ALLOWED_DEFECTS = (errors.NonASCIILocalPartDefect,)  # fine where the server speaks SMTPUTF8


class _Strict(EmailPolicy):
    """The default policy, refusing a header value that decodes to a line break or has a defect."""

    def header_store_parse(self, name: str, value: Any) -> tuple[str, Any]:
        stored: tuple[str, Any] = super().header_store_parse(name, value)
        header = stored[1]
        if _BREAK.search(str(header)):
            raise ValueError(f"{name} would hold a line break once decoded")
        defects = [d for d in getattr(header, "defects", ()) if not isinstance(d, _ALLOWED_DEFECTS)]
        if defects:
            raise ValueError(f"{name} cannot carry this value: {defects[0]}")
        return stored


STRICT = _Strict()


def header_text(text: str) -> str:
    """`text` as a header shows it literally: one line, no encoded word."""
    return _ENCODED_WORD.sub("= ?", one_line(text))


def address_problem(address: str) -> str | None:
    """Why an email cannot carry `address` as it is (None: it can)."""
    mail = EmailMessage(policy=STRICT)
    try:
        mail["To"] = address
    except Exception as exc:  # noqa: BLE001 - the parser also fails on odd input with AttributeError, IndexError...
        return f"not an address an email can carry ({type(exc).__name__}: {exc})"
    found = [a.addr_spec for a in mail["To"].addresses]
    if found != [address]:
        return "not an address an email can carry (it reads as another address)"
    return None


def message_id(delivery_id: int, message: dict[str, Any], sender: str) -> str:
    """The same on every retry of a delivery (a mail client can drop a repeat, as a webhook
    receiver drops a repeated webhook-id); the digest of the stored message keeps it unique
    across clusters whose delivery ids meet."""
    digest = hashlib.sha256(msgspec.json.encode(message)).hexdigest()[:20]
    domain = sender.rpartition("@")[2]
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        domain = FALLBACK_DOMAIN
    if address_problem(f"x@{domain}") is not None:
        domain = FALLBACK_DOMAIN
    return f"<cronos.notification.{delivery_id}.{digest}@{domain}>"


def build(
    *, subject: str, body: str, sender: str, to: Sequence[str], now: datetime, msg_id: str
) -> EmailMessage:  # fmt: skip
    """The email (ValueError when a header cannot be carried intact: nothing is sent)."""
    mail = EmailMessage(policy=STRICT)
    try:
        mail["Subject"] = header_text(subject)
        mail["From"] = sender
        mail["To"] = ", ".join(to)
        mail["Date"] = format_datetime(now)
        mail["Message-ID"] = msg_id
        mail.set_content(body)
    except ValueError:
        raise
    except Exception as exc:  # the parser's own failures on odd input: this email cannot be built
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc
    expected = [name.lower() for name in mail]
    parsed = BytesParser(policy=policies.default).parsebytes(mail.as_bytes())
    if [name.lower() for name in parsed] != expected:
        raise ValueError("the email's headers do not read back as they were set")
    return mail
