"""cronos.secret_strength: a shipped placeholder or a guessable value never works as a token, and
the settings that take a token refuse it at start, naming the variable (issue 37)."""

from __future__ import annotations

import re
import secrets
import uuid
from pathlib import Path

import pytest

from cronos.errors import ConfigError
from cronos.secret_strength import token_refusal
from cronos.settings import TOKEN_VARIABLES, VARIABLES, load_settings

ROOT = Path(__file__).resolve().parents[2]
# What the docs tell an operator to run, and the other usual generators.
STRONG = [
    "3f1c0e5b9a7d2c4e6f8a0b1c3d5e7f9a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e",  # openssl rand -hex 32
    "9c2f4a6b8d0e1f3a5c7e9b1d3f5a7c9e",  # openssl rand -hex 16
    "kX3v9QpL2mZ8rT5wN7yB4cF6hJ1dG0sA+e/uRiOo=",  # openssl rand -base64 32 (44 with the padding)
]
# Where the repository shows a token's value: every file a user copies from or reads.
SHIPPED = [ROOT / ".env.example", ROOT / "docker-compose.yml", ROOT / "README.md"]
SHIPPED += sorted(p for d in ("deploy", "docs") for p in (ROOT / d).rglob("*") if p.suffix in (".yaml", ".yml", ".md"))
ASSIGNED = re.compile(
    r"(?:CRONOS_ADMIN_TOKEN|CRONOS_METRICS_TOKEN|admin-token|metrics-token)\s*[:=]\s*[\"']?([^\s\"'#]+)"
)


def test_the_token_settings_are_the_admin_and_metrics_tokens_and_the_sign_in_secret() -> None:
    assert TOKEN_VARIABLES == ("CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN", "CRONOS_OIDC_CLIENT_SECRET")


@pytest.mark.parametrize("value", STRONG)
def test_random_tokens_are_accepted(value: str) -> None:
    assert token_refusal(value) is None


def test_generated_tokens_are_accepted() -> None:
    """The generators a user reaches for, many draws each: none is refused as guessable."""
    for _ in range(2000):
        for value in (secrets.token_hex(16), secrets.token_urlsafe(24), str(uuid.uuid4())):
            assert token_refusal(value) is None, value


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("CHANGE-ME-to-32-or-more-random-characters", "placeholder"),
        ("changeme", "placeholder"),
        # Random values get fixed ids: every pytest-xdist worker must collect the same test names.
        pytest.param("Change_Me_" + secrets.token_hex(16), "placeholder", id="Change_Me_<random hex>-placeholder"),
        ("<replace me with a real token please>", "placeholder"),
        pytest.param(secrets.token_hex(15), "at least 32", id="<30 random hex digits>-at least 32"),
        ("admin-" + "x" * 40, "guessable"),
        ("a" * 64, "guessable"),
        ("passwordpasswordpasswordpassword", "guessable"),
        ("0123456789" * 4, "guessable"),
        ("abcdefghijklmnopqrstuvwxyz0123456789", "guessable"),  # probed: the API started with it
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "guessable"),
        ("zyxwvutsrqponmlkjihgfedcba9876543210", "guessable"),
    ],
)
def test_placeholders_and_guessable_values_are_refused(value: str, why: str) -> None:
    refusal = token_refusal(value)
    assert refusal is not None and why in refusal and "must" in refusal
    assert value not in refusal, "the reason never quotes the secret"


def test_every_token_value_the_repository_ships_is_refused() -> None:
    """deploy/k8s/secret.yaml's `CHANGE-ME-to-32-or-more-random-characters` was 41 characters and
    worked as an admin token: no value a user can copy from the repository may."""
    found = {
        (path.relative_to(ROOT).as_posix(), value)
        for path in SHIPPED
        for value in ASSIGNED.findall(path.read_text())
        if "$" not in value and "{" not in value  # `$(openssl rand -hex 32)`, `${CRONOS_ADMIN_TOKEN:?...}`
    }
    assert ("deploy/k8s/secret.yaml", "CHANGE-ME-to-32-or-more-random-characters") in found
    for where, value in sorted(found):
        assert token_refusal(value) is not None, f"{where}: {value} works as a token"


@pytest.mark.parametrize("variable", TOKEN_VARIABLES)
def test_a_placeholder_token_fails_at_start_naming_the_variable(variable: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"^{variable}: must not be a placeholder") as raised:
        load_settings({variable: "CHANGE-ME-to-32-or-more-random-characters"}, env_file=tmp_path / "none")
    assert "CHANGE-ME" not in str(raised.value)
    assert "\n" not in str(raised.value)
    token = secrets.token_hex(32)
    assert getattr(load_settings({variable: token}, env_file=None), VARIABLES[variable][0]) == token
    assert getattr(load_settings({variable: ""}, env_file=None), VARIABLES[variable][0]) == ""  # off
