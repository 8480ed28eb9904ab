"""The image, built from deploy/Dockerfile and run: every Cronos service of docker-compose.yml from it.

tests/deploy/image.py builds it (podman, base images from Debian's packages) and runs each role with
`buildah run` on the host's network against the local PostgreSQL and Redis, on a fresh database and
key prefix. Select with `pytest -m image`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cluster.servers import free_port
from tests.deploy import image
from tests.deploy.manifests import VERSION
from tests.deploy.processes import Processes
from tests.deploy.test_deploy_processes import (
    README_JOB,
    ComposeStack,
    compose_stack,
    create_job,
    runs_of,
    the_readmes_job_completes,
)
from tests.services import Services
from tests.waiting import block_until, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.image, pytest.mark.timeout(1800)]

UID = 10001  # the Dockerfile's `cronos` user
# `cronos` as the image runs it (its script's interpreter, the script); buildah's exec helper above it
# names the script too.
ROLE_PROCESS = ["/opt/cronos/bin/python", "/opt/cronos-app/bin/cronos"]
# What a role is given; the rest of the environment is the image's (ENV) and Compose's.
PASSED = ("DATABASE_URL", "REDIS_URL", "PORT")
# Cronos's own layer (its sources and their bytecode: 3.95 MB at 0.1.0).
CODE_LAYER_MAX_BYTES = 8_000_000
# The background build (Makefile `test`) may still be running when this test starts.
BUILD_DEADLINE_S = 1200


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    """The image of the code checked out: the background build's (awaited), or built here."""
    missing = image.missing_tools()
    if missing:
        pytest.skip(f"no {', '.join(missing)} to build and run the image (apt-get install podman buildah debootstrap)")
    background = image.wait_for_background(BUILD_DEADLINE_S)
    if background is not None and "seconds" in background:
        return {"background": background}
    image.STATE.mkdir(parents=True, exist_ok=True)
    with (image.STATE / "test-build.log").open("w") as log:
        try:
            seconds = image.build(log)
        except subprocess.CalledProcessError as exc:
            raise AssertionError(f"{exc}: see {image.STATE / 'test-build.log'}") from None
    return {"background": background, "build": seconds}


class ImageProcesses(Processes):
    """Each role in its own buildah working container of the image."""

    def __init__(self, root: Path, containers: contextlib.ExitStack) -> None:
        super().__init__(root)
        self.containers = containers

    def command(self, name: str, args: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        ctr = self.containers.enter_context(image.container(name))
        passed = {k: v for k, v in env.items() if k.startswith("CRONOS_") or k in PASSED}
        return image.run_argv(ctr, ["cronos", *args], passed), dict(os.environ)

    def role_pid(self, name: str) -> int:
        """`buildah run` does not pass SIGTERM on: the cronos process below it gets it, as PID 1 would."""

        def found() -> int | None:
            for child in psutil.Process(self.procs[name].pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    if child.cmdline()[:2] == ROLE_PROCESS:
                        return child.pid
            return None

        return block_until(found, timeout=30, what=f"{name}'s cronos process")

    def kill_all(self) -> None:
        """Killing `buildah run` would leave its cronos process running: that one goes first."""
        for proc in self.procs.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
        super().kill_all()


@pytest.fixture
def from_image(tmp_path: Path, built: dict[str, Any]) -> Iterator[ImageProcesses]:
    with contextlib.ExitStack() as containers:
        made = ImageProcesses(tmp_path, containers)
        yield made
        made.kill_all()


def healthcheck(role: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command, for `role`, in a container of its own on the host's network."""
    with image.container(f"health-{role}") as ctr:
        argv = image.run_argv(ctr, ["python", "/usr/local/bin/cronos-healthcheck", role], env)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)


async def every_second_job_completes(stack: ComposeStack, processes: Processes, times: int) -> None:
    job_id = await create_job(stack, {**README_JOB, "name": "every second", "cron_expression": "* * * * * *"})

    async def done() -> list[dict[str, Any]] | None:
        ended = [r for r in await runs_of(stack, job_id) if r["finished_at"] is not None]
        return ended if len(ended) >= times else None

    ended = await wait_for(done, timeout=60, interval=0.5, what=f"{times} runs to end (log: {processes.root})")
    assert {(r["state"], r["error"]) for r in ended} == {("completed", None)}, ended


async def test_the_compose_services_run_from_the_image(
    from_image: ImageProcesses, empty_database: str, key_prefix: str, services: Services, built: dict[str, Any]
) -> None:
    """migrate, api, two dispatchers and both executors with their Compose commands, from the image: the
    README's job (on each executor pool) and an every-second job complete, the HEALTHCHECK passes, every
    role runs as the image's non-root user, and each drains within CRONOS_DRAIN_TIMEOUT_S of SIGTERM."""
    async with compose_stack(from_image, empty_database, key_prefix, services) as stack:
        await the_readmes_job_completes(stack, from_image)
        await the_readmes_job_completes(stack, from_image, "executor-gpu")
        await every_second_job_completes(stack, from_image, times=5)
        for name in stack.roles:
            process = psutil.Process(from_image.role_pid(name))
            assert process.uids().real == process.uids().effective == UID, name
        api_port = {"PORT": stack.env["api"]["PORT"]}
        checked = healthcheck("api", api_port)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        checked = healthcheck("dispatcher", {"CRONOS_METRICS_PORT": stack.env["dispatcher-1"]["CRONOS_METRICS_PORT"]})
        assert checked.returncode == 0, checked.stdout + checked.stderr
        nothing_there = healthcheck("api", {"PORT": str(free_port())})
        assert nothing_there.returncode != 0, "the healthcheck cannot fail: " + nothing_there.stdout
    drain_s = float(stack.env["api"]["CRONOS_DRAIN_TIMEOUT_S"])
    for name in stack.roles:
        assert from_image.drained[name] < drain_s, f"{name} took {from_image.drained[name]:.1f}s to stop"
    figures = {"build_s": built, "drained_s": {k: round(v, 2) for k, v in from_image.drained.items()}}
    (image.STATE / "figures.json").write_text(json.dumps(figures))
    print(json.dumps(figures))


def test_the_image_is_labelled_with_the_version_it_runs(built: dict[str, Any]) -> None:
    shown = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{json .Labels}}", image.IMAGE],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    labels = json.loads(shown.stdout)
    assert labels["org.opencontainers.image.version"] == VERSION
    with image.container("version") as ctr:
        shown = subprocess.run(image.run_argv(ctr, ["cronos", "--version"], {}), capture_output=True, text=True)
    assert shown.stdout == f"cronos {VERSION}\n", shown.stderr


def test_a_code_change_rebuilds_one_small_layer_and_the_image_holds_no_toolchain(built: dict[str, Any]) -> None:
    """Cronos is the last layer with content (its sources alone: a code change rebuilds only it); the
    dependencies sit below it. No compiler, tests, docs or build secret in the image."""
    shown = subprocess.run(
        ["podman", "history", "--format", "json", image.IMAGE], capture_output=True, text=True, check=True
    )
    layers = [(layer["size"], layer["CreatedBy"]) for layer in json.loads(shown.stdout)]  # newest first
    size, created_by = next((size, by) for size, by in layers if size > 0)
    assert "COPY" in created_by and size < CODE_LAYER_MAX_BYTES, layers[:8]
    with image.container("contents") as ctr:
        # ... nor the CA bundle the build trusted (a build secret: mounted for pip, in no layer).
        probe = (
            "for c in gcc cc g++ make; do command -v $c; done; env | grep -i cert;"
            " ls -d /opt/cronos-app/tests /opt/cronos-app/docs /run/secrets/ca"
        )
        found = subprocess.run(image.run_argv(ctr, ["sh", "-c", probe], {}), capture_output=True, text=True)
    assert found.stdout == "", found.stdout
