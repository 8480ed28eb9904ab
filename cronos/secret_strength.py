"""Whether a token a deployment hands Cronos is fit to be a credential (issue 37).

CRONOS_ADMIN_TOKEN and CRONOS_METRICS_TOKEN open the API to whoever knows them, so a value anyone
can read (a placeholder shipped in this repository, such as deploy/k8s/secret.yaml's
`CHANGE-ME-...`) or guess (short, one character repeated, a short pattern over and over, a run
such as `abcd...`) is refused at start: a deployment applied as shipped fails loudly instead of
running with a credential the world knows. Pure: a value in, the reason it is refused (or None) out; the reason
never quotes the value.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import pairwise

MIN_LENGTH = 32
# The value's characters as a sample of its alphabet: length x the Shannon entropy of their
# frequencies. 32 random hex characters (`openssl rand -hex 16`, 128 real bits) score 87 or more
# (200,000 draws), 64 (`openssl rand -hex 32`) 217 or more; one character repeated scores 0 and
# `admin-` followed by 40 x's 41.
MIN_BITS = 80.0
# Words of the placeholders shipped in deploy/, docs and examples, compared on lowercase letters
# and digits only: `CHANGE-ME-to-32-or-more-random-characters`, `change_me`, `<replace me>`.
PLACEHOLDER_WORDS = ("changeme", "replaceme", "placeholder", "yourtoken", "yoursecret", "randomcharacters")
HOW = "32+ random characters, e.g. `openssl rand -hex 32`"


def estimated_bits(value: str) -> float:
    """len(value) x the Shannon entropy of its character frequencies, in bits."""
    counts = Counter(value).values()
    return -sum(n * math.log2(n / len(value)) for n in counts)


def _period(value: str) -> int:
    """The shortest k such that the value is its first k characters repeated (cut at its length)."""
    return next(k for k in range(1, len(value) + 1) if all(value[i] == value[i % k] for i in range(len(value))))


def _walks(value: str) -> bool:
    """Most neighbours are the same or adjacent characters: `abcdefgh...`, `0123...`, `zyxw...` (a run
    scores high entropy and has no period, yet is guessed first). Random hex has about one such
    pair in six: past two in three, 600,000 draws of `openssl rand -hex 16` refused none."""
    steps = sum(abs(ord(a) - ord(b)) <= 1 for a, b in pairwise(value))
    return 3 * steps > 2 * (len(value) - 1)


def token_refusal(value: str) -> str | None:
    """Why `value` must not be used as a token (a sentence with "must"), or None when it may."""
    letters = "".join(c for c in value.lower() if c.isalnum())
    if any(word in letters for word in PLACEHOLDER_WORDS):
        return f"must not be a placeholder shipped with Cronos: set {HOW}"
    if len(value) < MIN_LENGTH:
        return f"must be at least {MIN_LENGTH} characters (or empty: off): set {HOW}"
    if _period(value) <= len(value) // 2 or estimated_bits(value) < MIN_BITS or _walks(value):
        return f"must not be guessable (few distinct characters, or a repeated pattern): set {HOW}"
    return None
