"""Settings: environment over `.env` over defaults; a bad value names its variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cronos.errors import ConfigError
from cronos.settings import VARIABLES, Settings, load_settings

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


def test_defaults_follow_the_seed(tmp_path: Path) -> None:
    settings = load_settings({}, env_file=tmp_path / "missing.env")
    assert settings.port == 3002
    assert settings.database_url == "postgresql://postgres@127.0.0.1:5432/cronos"
    assert settings.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.key_prefix == "cronos:"
    assert settings.node_id  # host-pid by default


def test_environment_overrides_dotenv(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "PORT=4000\nDATABASE_URL=postgresql://u:pw@db:5432/x\nCRONOS_KEY_PREFIX=dot:\nCRONOS_ALLOW_SHELL=yes\n"
    )
    settings = load_settings({"PORT": "5000", "CRONOS_LEADER_TTL_MS": "2000"}, env_file=env_file)
    assert settings.port == 5000  # the environment wins
    assert settings.database_url == "postgresql://u:pw@db:5432/x"  # from .env
    assert settings.key_prefix == "dot:"
    assert settings.allow_shell is True
    assert settings.leader_ttl_ms == 2000


def test_the_cli_follows_port_when_no_api_url_is_set(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PORT=4100\n")
    assert load_settings({}, env_file=env_file).api_url == "http://127.0.0.1:4100"  # from .env
    assert load_settings({"PORT": "4200"}, env_file=env_file).api_url == "http://127.0.0.1:4200"
    explicit = load_settings({"PORT": "4200", "CRONOS_API_URL": "https://cron.example"}, env_file=None)
    assert explicit.api_url == "https://cron.example"  # an explicit URL wins
    assert load_settings({}, env_file=None).api_url == "http://127.0.0.1:3002"


def test_overrides_and_node_id(tmp_path: Path) -> None:
    settings = load_settings({"CRONOS_NODE_ID": "n-7"}, env_file=None, port=0)
    assert (settings.node_id, settings.port) == ("n-7", 0)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PORT", "abc"),
        ("PORT", "70000"),
        ("CRONOS_LEADER_TTL_MS", "5"),
        ("DATABASE_URL", "mysql://x"),
        ("REDIS_URL", "http://x"),
        ("CRONOS_LOG_LEVEL", "LOUD"),
        ("CRONOS_ALLOW_SHELL", "maybe"),
        ("CRONOS_KEY_PREFIX", "a b"),
        ("CRONOS_RUN_LEASE_S", "-1"),
        ("CRONOS_METRIC_LABEL_KEYS", "a,b,c,d,e,f"),
        ("CRONOS_METRIC_LABEL_KEYS", "team,-bad"),
        ("CRONOS_METRIC_LABEL_KEYS", "a.b,a_b"),
    ],
)
def test_bad_value_names_the_variable(variable: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({variable: value}, env_file=None)
    assert str(info.value).startswith(f"{variable}: ")
    assert "\n" not in str(info.value)


def test_a_bad_executor_label_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^CRONOS_EXECUTOR_LABELS: each label must be key=value, and 'rack' is not$"):
        load_settings({"CRONOS_EXECUTOR_LABELS": "zone=eu,rack"}, env_file=None)


def test_bad_value_in_dotenv_names_the_variable(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("CRONOS_EXECUTOR_CONCURRENCY=lots\n")
    with pytest.raises(ConfigError, match=r"^CRONOS_EXECUTOR_CONCURRENCY: "):
        load_settings({}, env_file=env_file)


def test_every_variable_maps_to_a_field() -> None:
    fields = set(Settings.__struct_fields__)
    assert {field for field, _parse, _help in VARIABLES.values()} <= fields
    assert {"PORT", "DATABASE_URL", "REDIS_URL", "CRONOS_NODE_ID", "CRONOS_KEY_PREFIX", "CRONOS_LOG_LEVEL"} <= set(
        VARIABLES
    )


def test_env_example_lists_exactly_the_variables_read() -> None:
    listed = re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert sorted(listed) == sorted(VARIABLES)


@pytest.mark.parametrize(
    ("raw", "seconds"), [("30d", 30 * 86_400), ("30", 30 * 86_400), ("36h", 36 * 3600), ("2w", 14 * 86_400), ("0", 0)]
)
def test_runs_retention_takes_an_age_or_zero(raw: str, seconds: float) -> None:
    assert load_settings({"CRONOS_RUNS_RETENTION": raw}, env_file=None).runs_retention_s == seconds


@pytest.mark.parametrize("raw", ["soon", "-1d", "30m", "10s"])
def test_a_bad_runs_retention_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"^CRONOS_RUNS_RETENTION: must"):
        load_settings({"CRONOS_RUNS_RETENTION": raw}, env_file=None)


def test_runs_retention_defaults_to_thirty_days() -> None:
    assert load_settings({}, env_file=None).runs_retention_s == 30 * 86_400


def test_redis_url_may_name_a_cluster() -> None:
    url = "redis+cluster://10.0.0.5:7000/0"
    assert load_settings({"REDIS_URL": url}, env_file=None).redis_url == url


def test_queues_an_executor_serves(tmp_path: Path) -> None:
    assert load_settings({}, env_file=None).executor_queues == ("default",)
    assert load_settings({"CRONOS_QUEUES": " gpu, edge-1 ,gpu"}, env_file=None).executor_queues == ("gpu", "edge-1")
    for bad in ("", " , ", "a b", "a:b"):
        with pytest.raises(ConfigError, match="CRONOS_QUEUES"):
            load_settings({"CRONOS_QUEUES": bad}, env_file=None)


def test_metric_label_keys_are_a_short_list_of_label_keys() -> None:
    assert load_settings({}, env_file=None).metric_label_keys == ()
    keys = load_settings({"CRONOS_METRIC_LABEL_KEYS": " team, example.com/tier ,team"}, env_file=None)
    assert keys.metric_label_keys == ("team", "example.com/tier")
