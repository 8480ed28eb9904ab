"""Group claims to scopes (cronos.signin_grants) and the sign-in settings that carry the table."""

from __future__ import annotations

import secrets

import pytest

from cronos.errors import ConfigError
from cronos.settings import load_settings
from cronos.signin_grants import actor_of, claimed_groups, grants_for, parse_group_grants

SECRET = secrets.token_hex(32)
SIGN_IN = {
    "CRONOS_OIDC_ISSUER": "https://id.example.com/",
    "CRONOS_OIDC_CLIENT_ID": "cronos-console",
    "CRONOS_OIDC_CLIENT_SECRET": SECRET,
    "CRONOS_OIDC_REDIRECT_BASE": "https://cronos.example.com",
}


def test_json_and_compact_forms_give_the_same_table() -> None:
    as_json = parse_group_grants('{"ops": "admin", "devs": ["write", "read"], "audit": "read"}')
    compact = parse_group_grants("ops=admin, devs=write,devs=read ,audit=read")
    assert as_json == compact == (("audit", ("read",)), ("devs", ("read", "write")), ("ops", ("admin",)))


def test_groups_grant_the_union_of_their_scopes_and_unknown_groups_nothing() -> None:
    table = parse_group_grants("ops=admin,devs=write,viewers=read")
    assert grants_for(["devs", "viewers"], table) == {"write", "read"}
    assert grants_for(["ops"], table) == {"admin"}
    assert grants_for(["marketing"], table) == frozenset()
    assert grants_for([], table) == frozenset()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ops=root", "'ops' grants 'root'"),
        ('{"ops": 3}', "scope or a list of scopes; 'ops'"),
        ('{"ops": []}', "'ops' does not"),
        ("ops", "group=scope pairs"),
        ("=admin", "group=scope pairs"),
        ('["ops"]', "group=scope pairs"),
        ("{not json", "JSON object"),
    ],
)
def test_a_bad_table_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="must") as err:
        parse_group_grants(text)
    assert says in str(err.value)


def test_the_group_claim_is_a_list_or_one_string() -> None:
    assert claimed_groups({"groups": ["a", "b", 3]}, "groups") == ("a", "b")
    assert claimed_groups({"roles": "ops"}, "roles") == ("ops",)
    assert claimed_groups({"groups": {"a": 1}}, "groups") == ()
    assert claimed_groups({}, "groups") == ()


def test_the_actor_is_the_email_else_the_subject() -> None:
    assert actor_of({"sub": "42", "email": "ana@example.com"}) == "oidc:ana@example.com"
    assert actor_of({"sub": "42"}) == "oidc:42"


def test_sign_in_settings_decode_and_trim_the_urls() -> None:
    settings = load_settings(
        {**SIGN_IN, "CRONOS_OIDC_GROUPS": '{"ops":"admin"}', "CRONOS_OIDC_SESSION_S": "3600"}, env_file=None
    )
    assert settings.oidc_issuer == "https://id.example.com"
    assert settings.oidc_groups == (("ops", ("admin",)),)
    assert settings.oidc_session_s == 3600


@pytest.mark.parametrize("missing", ["CRONOS_OIDC_CLIENT_ID", "CRONOS_OIDC_CLIENT_SECRET", "CRONOS_OIDC_REDIRECT_BASE"])
def test_an_issuer_without_its_client_refuses_to_start(missing: str) -> None:
    env = {k: v for k, v in SIGN_IN.items() if k != missing}
    with pytest.raises(ConfigError, match=missing):
        load_settings(env, env_file=None)


def test_a_placeholder_client_secret_refuses_to_start_without_showing_it() -> None:
    placeholder = "CHANGE-ME-to-32-or-more-random-characters"
    with pytest.raises(ConfigError, match="CRONOS_OIDC_CLIENT_SECRET: must not be a placeholder") as err:
        load_settings({**SIGN_IN, "CRONOS_OIDC_CLIENT_SECRET": placeholder}, env_file=None)
    assert placeholder not in str(err.value)
    assert "\n" not in str(err.value)


def test_a_bad_group_table_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="CRONOS_OIDC_GROUPS: must grant one of read, write, admin"):
        load_settings({**SIGN_IN, "CRONOS_OIDC_GROUPS": "ops=superuser"}, env_file=None)
