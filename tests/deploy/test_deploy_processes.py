"""The deploy files' commands and environments, run as real processes (no container engine here).

Each container of the rendered Kubernetes manifests, and each Cronos service of docker-compose.yml,
is started as `cronos <its args>` with the environment it would get, on a fresh database and a
private Redis prefix; only what a container gives the process for free is replaced: the backends'
addresses, and the ports (two pods, or two containers, may listen on one port; two processes here
cannot). What the static tests compare with the product's definitions, these see it do.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import asyncpg
import pytest
import yaml

from tests.cluster.servers import free_port
from tests.deploy.manifests import (
    ROOT,
    environment,
    k8s_manifests,
    of_kind,
    one,
    operator_environment,
    pod_spec,
    pool_manifests,
)
from tests.deploy.processes import Processes
from tests.deploy.test_compose import REQUIRED_VALUE, _interpolate
from tests.services import Services
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster


def _wait_all(processes: Processes, names: list[str], timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    for name in names:
        try:
            code = processes.procs[name].wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} still running after {timeout}s:\n{processes.log(name)[-3000:]}") from None
        assert code == 0, f"{name} exited {code}:\n{processes.log(name)[-3000:]}"


async def _answers_200(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url) as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def _applied(log: str) -> list[int]:
    """The versions a `cronos migrate` process says it applied (its db.migrations_done line)."""
    match = re.search(r'"event":"db\.migrations_done".*?"applied":\[([\d,]*)\]', log)
    assert match, log[-2000:]
    return [int(v) for v in match[1].split(",") if v]


async def _schema_versions(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return [r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")]
    finally:
        await conn.close()


async def test_the_kubernetes_pods_start_as_rendered(
    processes: Processes, empty_database: str, key_prefix: str, services: Services
) -> None:
    """First install: every Deployment's init container (`cronos migrate`) starts at once on a
    database that does not exist yet; each exits 0 and the migrations are applied once in all.
    Then each role container answers its readiness and liveness probes on the port it declares, and
    the README's first job, created through the API, runs on the executor as rendered."""
    everything = k8s_manifests() + pool_manifests()
    deployments = of_kind(everything, "Deployment")
    ports: dict[str, dict[str, int]] = {}  # deployment -> {probe port name: the port it got here}

    def env_of(deployment: str, container: dict[str, Any]) -> dict[str, str]:
        env = operator_environment(everything, container)
        env |= {"DATABASE_URL": empty_database, "REDIS_URL": services.redis_url, "CRONOS_KEY_PREFIX": key_prefix}
        env["CRONOS_NODE_ID"] = f"{deployment}-{container['name']}"
        here = ports.setdefault(deployment, {})
        for declared in container.get("ports", []):
            here[declared["name"]] = here.get(declared["name"]) or free_port()
            variable = "PORT" if container["args"][0] == "api" else "CRONOS_METRICS_PORT"
            assert int(env[variable]) == declared["containerPort"], f"{deployment}: {variable}"
            env[variable] = str(here[declared["name"]])
        return env

    inits = []
    for d in deployments:
        for container in pod_spec(d.doc)["initContainers"]:
            name = f"{d.name}-init-{container['name']}"
            processes.start(name, container["args"], env_of(d.name, container))
            inits.append(name)
    assert len(inits) == len(deployments) >= 4
    _wait_all(processes, inits)
    applied = [v for name in inits for v in _applied(processes.log(name))]
    everything_known = sorted(int(p.name[:4]) for p in (ROOT / "cronos/store/migrations").glob("[0-9]*_*.sql"))
    assert everything_known
    assert sorted(applied) == everything_known, "each migration applied once, by one of the pods"
    assert await _schema_versions(empty_database) == everything_known

    roles = [d for d in deployments if d.name in ("cronos-api", "cronos-dispatcher", "cronos-executor")]
    envs = {d.name: env_of(d.name, pod_spec(d.doc)["containers"][0]) for d in roles}
    for d in roles:
        processes.start(d.name, pod_spec(d.doc)["containers"][0]["args"], envs[d.name])
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as session:
        for d in roles:
            container = pod_spec(d.doc)["containers"][0]
            for probe in ("readinessProbe", "livenessProbe"):
                get = container[probe]["httpGet"]
                url = f"http://127.0.0.1:{ports[d.name][get['port']]}{get['path']}"

                async def ok(url: str = url) -> bool:
                    return await _answers_200(session, url)

                await wait_for(ok, timeout=30, what=f"{d.name} {probe} {get['path']} (log: {processes.root})")
    api = envs["cronos-api"]
    headers = {"Authorization": f"Bearer {api['CRONOS_ADMIN_TOKEN']}"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5), headers=headers) as session:
        stack = ComposeStack(f"http://127.0.0.1:{api['PORT']}", session, [d.name for d in roles], envs)
        run = await readme_job_run(stack, processes, "cronos-executor")
        assert run["node_id"].startswith("cronos-executor-"), run
    for d in roles:
        assert processes.stop(d.name) == 0, processes.log(d.name)[-3000:]


def test_the_api_refuses_to_start_with_the_secret_as_shipped(processes: Processes, services: Services) -> None:
    """deploy/k8s/secret.yaml's placeholder admin token (41 characters) used to work as one: the API
    applied as shipped exits at once, non-zero, with one line naming the setting."""
    everything = k8s_manifests()
    api = pod_spec(one(everything, "Deployment", "cronos-api"))["containers"][0]
    env = environment(everything, api) | {"REDIS_URL": services.redis_url, "PORT": str(free_port())}
    proc = processes.start("api", api["args"], env)
    assert proc.wait(30) != 0
    lines = processes.log("api").strip().splitlines()
    assert len(lines) == 1 and "CRONOS_ADMIN_TOKEN" in lines[0], lines
    assert "CHANGE-ME" not in lines[0], "the refusal never quotes the secret"


@dataclass
class ComposeStack:
    """Compose's Cronos services running (see `compose_stack`): the API's address and a session with the
    admin token."""

    base: str
    session: aiohttp.ClientSession
    roles: list[str]  # the long-running ones, in start order
    env: dict[str, dict[str, str]]


@asynccontextmanager
async def compose_stack(
    processes: Processes, database: str, key_prefix: str, services: Services
) -> AsyncIterator[ComposeStack]:
    """migrate, then api, every dispatcher replica and the executor, each with its Compose `command` and
    environment (the backends' addresses and the ports replaced); stopped with SIGTERM at the end, each
    exiting 0."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    envs: dict[str, dict[str, str]] = {}

    def env_of(service: str, name: str) -> dict[str, str]:
        env = {k: _interpolate(str(v)) for k, v in compose[service]["environment"].items()}
        assert "@postgres:" in env["DATABASE_URL"] and "//redis:" in env["REDIS_URL"]
        env |= {"DATABASE_URL": database, "REDIS_URL": services.redis_url, "CRONOS_KEY_PREFIX": key_prefix}
        env |= {"CRONOS_NODE_ID": name, "CRONOS_METRICS_PORT": str(free_port())}
        envs[name] = env
        return env

    processes.start("migrate", compose["migrate"]["command"], env_of("migrate", "migrate"))
    _wait_all(processes, ["migrate"])
    api_env = env_of("api", "api")
    published = compose["api"]["ports"][0].split(":")
    assert int(published[-1]) == int(api_env["PORT"])
    api_env["PORT"] = str(free_port())
    processes.start("api", compose["api"]["command"], api_env)
    roles = ["api"]
    # Every other long-running Cronos service, those of a profile (executor-gpu) too.
    image = compose["api"]["image"]
    others = [k for k, v in compose.items() if v.get("image") == image and k not in ("migrate", "api")]
    assert {"dispatcher", "executor"} <= set(others)
    for service in others:
        replicas = compose[service].get("deploy", {}).get("replicas", 1)
        for i in range(1, replicas + 1):
            name = f"{service}-{i}"
            processes.start(name, compose[service]["command"], env_of(service, name))
            roles.append(name)

    base = f"http://127.0.0.1:{api_env['PORT']}"
    headers = {"Authorization": f"Bearer {REQUIRED_VALUE}"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5), headers=headers) as session:

        async def ready() -> bool:
            return await _answers_200(session, f"{base}/health")

        await wait_for(ready, timeout=60, what=f"the API's /health (log: {processes.root})")
        yield ComposeStack(base, session, roles, envs)
    for name in reversed(roles):
        assert processes.stop(name) == 0, processes.log(name)[-3000:]


# The README's first job.
README_JOB = {
    "name": "Sync Database Indexes",
    "cron_expression": "*/5 * * * *",
    "payload": {"action": "reindex", "target": "users"},
}


async def create_job(stack: ComposeStack, job: dict[str, Any]) -> int:
    async with stack.session.post(f"{stack.base}/api/jobs", json=job) as response:
        assert response.status == 201, await response.text()
        return int((await response.json())["id"])


async def runs_of(stack: ComposeStack, job_id: int) -> list[dict[str, Any]]:
    async with stack.session.get(f"{stack.base}/api/jobs/{job_id}/runs") as response:
        assert response.status == 200, await response.text()
        found: list[dict[str, Any]] = (await response.json())["items"]
        return found


def _queue_of(command: list[str]) -> str | None:
    return next((command[i + 1] for i, arg in enumerate(command) if arg == "--queue"), None)


async def readme_job_run(
    stack: ComposeStack, processes: Processes, executor_log: str, queue: str | None = None
) -> dict[str, Any]:
    """The README's example job (`payload.action: reindex`, in `queue`), created and triggered through
    the API: its run, which ended `completed`."""
    job = {**README_JOB, **({"name": f"{README_JOB['name']} on {queue}", "queue": queue} if queue else {})}
    job_id = await create_job(stack, job)
    async with stack.session.post(f"{stack.base}/api/jobs/{job_id}/trigger") as response:
        assert response.status == 202, await response.text()

    async def ended() -> dict[str, Any] | None:
        return next((r for r in await runs_of(stack, job_id) if r["finished_at"] is not None), None)

    run = await wait_for(ended, timeout=30, what=f"the triggered run to end (log: {processes.root})")
    assert (run["state"], run["error"]) == ("completed", None), processes.log(executor_log)[-3000:]
    return run


async def the_readmes_job_completes(stack: ComposeStack, processes: Processes, service: str = "executor") -> None:
    """The README's example job completes on the Compose `service` (in its queue, when its command
    names one)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    run = await readme_job_run(stack, processes, f"{service}-1", _queue_of(compose[service]["command"]))
    assert re.fullmatch(rf"{service}-\d+", run["node_id"]), run


async def test_the_compose_stack_runs_the_readmes_example_job(
    processes: Processes, empty_database: str, key_prefix: str, services: Services
) -> None:
    """migrate, api, two dispatchers and both executors with their Compose commands and environments:
    the README's example job, triggered through the API, completes (on the gpu pool too, in its queue)."""
    async with compose_stack(processes, empty_database, key_prefix, services) as stack:
        await the_readmes_job_completes(stack, processes)
        await the_readmes_job_completes(stack, processes, "executor-gpu")
