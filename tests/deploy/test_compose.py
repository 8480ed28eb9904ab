"""docker-compose.yml: valid against the Compose Specification schema, and shaped as promised.

No Docker engine runs on these machines, so `docker compose config` cannot be the check; the
compose-spec JSON schema (tests/deploy/schemas/compose-spec.json, vendored) is, with what the
product defines: its variables, its ports, the tasks its example job needs.
tests/deploy/test_deploy_processes.py runs the roles' commands and environments as real processes.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

from cronos import tasks
from cronos.settings import VARIABLES, load_settings
from tests.deploy.manifests import ROOT, SCHEMAS

SCHEMA = SCHEMAS / "compose-spec.json"
ROLES = ("migrate", "api", "dispatcher", "executor")
EXECUTORS = ("executor", "executor-gpu")
# `docker compose up` refuses to start without these (`${VAR:?message}`); the file's header names each.
REQUIRED = {"CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN", "GRAFANA_ADMIN_PASSWORD"}
# Published on every interface of the host: the API alone, and it wants a token for every request.
PUBLIC = {"api"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


# What an operator puts in CRONOS_ADMIN_TOKEN and friends (required variables: `${VAR:?message}`).
REQUIRED_VALUE = "a-random-secret-of-more-than-32-characters"


def _interpolate(value: str) -> str:
    """Compose's ${VAR:-default} with an empty environment; ${VAR:?message} as if the operator set VAR."""
    value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", REQUIRED_VALUE, value)


def test_validates_against_the_compose_spec(compose: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []


def test_backends_are_postgres16_and_redis7_with_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    assert services["postgres"]["image"] == "postgres:16"
    assert services["redis"]["image"] == "redis:7"
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"], name


def test_every_role_runs_the_one_image_with_its_command(services: dict[str, dict[str, Any]]) -> None:
    images = {services[role]["image"] for role in ROLES}
    assert len(images) == 1
    for role in ROLES:
        assert services[role]["build"]["dockerfile"] == "deploy/Dockerfile"
        assert services[role]["command"][0] == role
    assert (ROOT / "deploy/Dockerfile").is_file()


def test_migrate_is_one_shot_and_gates_every_role(services: dict[str, dict[str, Any]]) -> None:
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for role in ("api", "dispatcher", "executor"):
        assert services[role]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", role


def test_api_on_3002_and_two_dispatchers(services: dict[str, dict[str, Any]]) -> None:
    assert "3002:3002" in services["api"]["ports"]
    assert services["dispatcher"]["deploy"]["replicas"] == 2


def test_executor_scales(services: dict[str, dict[str, Any]]) -> None:
    """`docker compose up --scale executor=N` fails with a fixed name or a fixed host port."""
    executor = services["executor"]
    assert "container_name" not in executor
    assert "ports" not in executor
    assert "container_name" not in services["dispatcher"] and "ports" not in services["dispatcher"]


def test_roles_share_valid_settings(services: dict[str, dict[str, Any]]) -> None:
    for role in ROLES:
        env = {k: _interpolate(str(v)) for k, v in services[role]["environment"].items()}
        assert {"DATABASE_URL", "REDIS_URL"} <= set(env), role
        settings = load_settings(environ=env, env_file=None)
        assert settings.metrics_port == 9102, role
        assert settings.log_format == "json", role
        assert "@postgres:" in settings.database_url and "//redis:" in settings.redis_url


def test_graceful_stop_outlasts_the_drain(services: dict[str, dict[str, Any]]) -> None:
    executor = services["executor"]
    grace_s = int(executor["stop_grace_period"].rstrip("s"))
    assert grace_s > float(executor["environment"]["CRONOS_DRAIN_TIMEOUT_S"])


def test_prometheus_scrapes_every_role(services: dict[str, dict[str, Any]]) -> None:
    prometheus = services["prometheus"]
    mounts = [v.split(":") for v in prometheus["volumes"]]
    config_file = next(src for src, dst, *_ in mounts if dst == "/etc/prometheus/prometheus.yml")
    config = yaml.safe_load((ROOT / config_file).read_text())
    targets: set[str] = set()
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            targets.update(static["targets"])
        for dns in job.get("dns_sd_configs", []):
            assert dns["type"] == "A", "A-record discovery finds every replica"
            targets.update(f"{name}:{dns['port']}" for name in dns["names"])
    metrics_port = services["executor"]["environment"]["CRONOS_METRICS_PORT"]
    assert {"api:3002", f"dispatcher:{metrics_port}", f"executor:{metrics_port}"} <= targets


def test_the_api_requires_tokens_and_prometheus_sends_the_metrics_token(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    env = services["api"]["environment"]
    assert env["CRONOS_AUTH"] == "required"
    for name in ("CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN"):
        assert re.fullmatch(rf"\$\{{{name}:\?[^}}]+\}}", env[name]), "compose refuses to start without it"
    settings = load_settings(environ={k: _interpolate(str(v)) for k, v in env.items()}, env_file=None)
    assert settings.auth == "required" and settings.admin_token == REQUIRED_VALUE
    for role in ("dispatcher", "executor", "migrate"):
        assert "CRONOS_ADMIN_TOKEN" not in services[role]["environment"], role
    # Prometheus reads the metrics token from a compose secret fed by the same variable.
    assert compose["secrets"]["metrics_token"] == {"environment": "CRONOS_METRICS_TOKEN"}
    assert "metrics_token" in services["prometheus"]["secrets"]
    config_file = next(v.split(":")[0] for v in services["prometheus"]["volumes"] if "prometheus.yml" in v)
    config = yaml.safe_load((ROOT / config_file).read_text())
    api_job = next(job for job in config["scrape_configs"] if job["job_name"] == "cronos-api")
    assert api_job["authorization"] == {"type": "Bearer", "credentials_file": "/run/secrets/metrics_token"}


def test_the_validator_rejects_a_typo(compose: dict[str, Any]) -> None:
    """Negative control: the schema check is not vacuous."""
    broken = json.loads(json.dumps(compose))
    broken["services"]["api"]["port"] = broken["services"]["api"].pop("ports")
    assert list(jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).iter_errors(broken))


def test_required_variables_refuse_to_start_and_are_documented_in_the_file() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{([A-Z_]+):\?[^}]+\}", text))
    assert required == REQUIRED
    header = text.split("\nname:", 1)[0]
    for name in REQUIRED:
        assert re.search(rf"^#\s+{name}\s", header, re.MULTILINE), f"the header does not say what {name} is"
    assert not re.search(r"\$\{(?:CRONOS_[A-Z_]*TOKEN|GRAFANA_ADMIN_PASSWORD):-", text), "a secret with a default"


def _compose_config(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`podman-compose config`: a Compose implementation resolves the file (anchors, interpolation) as
    `docker compose up` would before starting anything; in a folder of its own (no `.env` of the
    repository's), with `env` as the only variables of ours."""
    shutil.copy(ROOT / "docker-compose.yml", folder / "docker-compose.yml")
    base = {k: v for k, v in os.environ.items() if k not in REQUIRED and not k.startswith(("CRONOS_", "POSTGRES_"))}
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"].values()
    profiles = sorted({p for service in services for p in service.get("profiles", [])})
    return subprocess.run(
        [str(Path(sys.executable).parent / "podman-compose"), "-f", "docker-compose.yml",
         *(arg for p in profiles for arg in ("--profile", p)), "config"],
        cwd=folder, env={**base, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("unset", sorted(REQUIRED))
def test_compose_refuses_to_start_without_a_required_variable(tmp_path: Path, unset: str) -> None:
    done = _compose_config(tmp_path, {name: REQUIRED_VALUE for name in REQUIRED - {unset}})
    assert done.returncode != 0, done.stdout
    said = re.search(rf"\$\{{{unset}:\?([^}}]+)\}}", (ROOT / "docker-compose.yml").read_text())
    assert said and unset in done.stderr and said[1] in done.stderr, done.stderr[-2000:]


def test_the_tests_read_the_file_as_compose_does(tmp_path: Path, services: dict[str, dict[str, Any]]) -> None:
    """What `_interpolate` makes of each Cronos service's environment (the processes and the image run
    with it) is what Compose resolves, the required variables set."""
    done = _compose_config(tmp_path, dict.fromkeys(REQUIRED, REQUIRED_VALUE))
    assert done.returncode == 0, done.stderr[-2000:]
    resolved = yaml.safe_load(done.stdout)["services"]
    cronos = [name for name, service in services.items() if service.get("image") == services["api"]["image"]]
    assert set(cronos) >= {"migrate", "api", "dispatcher", "executor"}
    for name in cronos:
        ours = {k: _interpolate(str(v)) for k, v in services[name]["environment"].items()}
        assert {k: str(v) for k, v in resolved[name]["environment"].items()} == ours, name
        assert resolved[name]["command"] == services[name]["command"], name


def _published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each short-syntax port; address '' is every interface."""
    found = []
    for spec in service.get("ports", []):
        parts = str(spec).split(":")
        address = parts[0] if len(parts) == 3 else ""
        found.append((address, int(parts[-2]), int(parts[-1])))
    return found


def test_only_the_api_is_published_beyond_this_host(services: dict[str, dict[str, Any]]) -> None:
    """Prometheus has no authentication, Grafana a password: both on 127.0.0.1 (ssh -L to reach them)."""
    for name in ("prometheus", "grafana"):
        assert _published(services[name]), name
    for name, service in services.items():
        for address, _host_port, _port in _published(service):
            assert address == "127.0.0.1" or name in PUBLIC, f"{name} is published on every interface"


def test_grafana_has_no_anonymous_access_and_no_default_password(services: dict[str, dict[str, Any]]) -> None:
    env = services["grafana"]["environment"]
    assert env.get("GF_AUTH_ANONYMOUS_ENABLED", "false") == "false"
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", env["GF_SECURITY_ADMIN_PASSWORD"])


def test_the_api_listens_on_the_published_port_on_every_interface(services: dict[str, dict[str, Any]]) -> None:
    api = services["api"]
    settings = load_settings(environ={k: _interpolate(str(v)) for k, v in api["environment"].items()}, env_file=None)
    assert [port for _address, _host_port, port in _published(api)] == [settings.port]
    # Said out loud: a release may default to loopback while no token is required (protected mode).
    assert api["environment"]["CRONOS_API_HOST"] == "0.0.0.0" and settings.auth == "required"


def _imports(command: list[str]) -> list[ModuleType]:
    return [importlib.import_module(command[i + 1]) for i, arg in enumerate(command) if arg == "--import"]


@pytest.mark.parametrize("name", EXECUTORS)
def test_the_executors_load_the_example_jobs_task(services: dict[str, dict[str, Any]], name: str) -> None:
    """The README's example job is `{"action": "reindex", ...}`: an executor that imports no task
    module fails it `no task registered`."""
    modules = _imports(services[name]["command"])
    reindex = tasks.lookup("reindex")
    assert reindex is not None and any(reindex in vars(module).values() for module in modules), name


def test_every_variable_is_one_cronos_reads(services: dict[str, dict[str, Any]]) -> None:
    """A misspelt variable is silently ignored by the product."""
    for name, service in services.items():
        if service.get("image") == services["api"]["image"]:
            unknown = set(service["environment"]) - set(VARIABLES)
            assert not unknown, f"{name}: {sorted(unknown)}"


def test_every_volume_is_declared_and_every_mounted_file_exists(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(compose["volumes"])
    used = set()
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source}"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert used == declared
