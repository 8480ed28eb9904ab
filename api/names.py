"""A job's name as stored: NFC-normalised, never blank, no control or bidi characters.

Two names that render alike must not be two jobs: `café` typed as NFC and as NFD are the same
name once normalised (the unique constraint then refuses the twin), and a name carrying U+202E
(right-to-left override) can show the console or the CLI another job's name. Checked on the
names a create or a PATCH gives (a stored name is not refused when other fields change).
"""

from __future__ import annotations

import unicodedata

from cronos.errors import InvalidInput

FIELD = "$.name"
MAX_LENGTH = 200  # api.schemas.Name and the column's CHECK
# Bidi embeddings, overrides and isolates, the marks, and the Arabic letter mark.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def _invisible(char: str) -> bool:
    return char.isspace() or unicodedata.category(char) == "Cf"  # spaces, zero-width and format characters


def job_name(name: str, field: str = FIELD) -> str:
    """The name normalised (NFC), or InvalidInput naming `field`."""
    for char in name:
        if char in BIDI_CONTROLS:
            raise InvalidInput(field, f"must not contain bidirectional control characters (U+{ord(char):04X})")
        if unicodedata.category(char) == "Cc":
            raise InvalidInput(field, f"must not contain control characters (U+{ord(char):04X})")
    if all(_invisible(char) for char in name):
        raise InvalidInput(field, "must not be blank (only spaces or invisible characters)")
    normal = unicodedata.normalize("NFC", name)
    if len(normal) > MAX_LENGTH:
        raise InvalidInput(field, f"at most {MAX_LENGTH} characters (after NFC normalisation)")
    return normal
