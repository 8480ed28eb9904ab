"""A job's name as stored: NFC-normalised, never blank, no control or bidi characters.

Two names that render alike must not be two jobs: `café` typed as NFC and as NFD are the same
name once normalised (the unique constraint then refuses the twin), and a name carrying U+202E
(right-to-left override) can show the console or the CLI another job's name. Checked on the
names a create or a PATCH gives (a stored name is not refused when other fields change).
"""

from __future__ import annotations

import re
import unicodedata

from cronos.errors import InvalidInput

FIELD = "$.name"
MAX_LENGTH = 200  # api.schemas.Name and the column's CHECK
# Regex classes, shared by the check below and the OpenAPI document's pattern (api.schemas.Name),
# which read alike in Python and ECMA-262. Bidi: embeddings and overrides, isolates, the marks and
# the Arabic letter mark; control: C0, DEL and C1 (NUL, which PostgreSQL cannot store, included).
_BIDI = r"\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
_CONTROL = r"\x00-\x1f\x7f-\x9f"
# Spaces and characters that show nothing: a name of only these is blank.
_INVISIBLE = r" \xa0\xad\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f-\u2064\u3000\ufeff"
PATTERN = f"^[^{_CONTROL}{_BIDI}]*[^{_CONTROL}{_BIDI}{_INVISIBLE}][^{_CONTROL}{_BIDI}]*$"
_BIDI_RE = re.compile(f"[{_BIDI}]")
_CONTROL_RE = re.compile(f"[{_CONTROL}]")
_VISIBLE_RE = re.compile(f"[^{_INVISIBLE}]")


def job_name(name: str, field: str = FIELD) -> str:
    """The name normalised (NFC), or InvalidInput naming `field`; what PATTERN admits."""
    for rule, why in ((_BIDI_RE, "bidirectional control"), (_CONTROL_RE, "control")):
        if (found := rule.search(name)) is not None:
            raise InvalidInput(field, f"must not contain {why} characters (U+{ord(found[0]):04X})")
    if _VISIBLE_RE.search(name) is None:
        raise InvalidInput(field, "must not be blank (only spaces or invisible characters)")
    normal = unicodedata.normalize("NFC", name)
    if len(normal) > MAX_LENGTH:
        raise InvalidInput(field, f"at most {MAX_LENGTH} characters (after NFC normalisation)")
    return normal
