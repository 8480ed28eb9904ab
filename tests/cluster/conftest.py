"""Fixtures for process-level tests: a Cluster factory that always cleans up, and keeps logs of failures."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster

ARTIFACTS = Path("artifacts")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def make_cluster(request: pytest.FixtureRequest) -> Iterator[Callable[..., Cluster]]:
    """`make_cluster(dispatchers=.., executors=.., ...)` starts a Cluster; all are closed after the test.

    When the test fails, node logs and the PostgreSQL log are copied to ./artifacts/<test>/.
    """
    made: list[Cluster] = []

    def make(**options: Any) -> Cluster:
        cluster = Cluster(**options)
        made.append(cluster)
        cluster.start()
        return cluster

    try:
        yield make
    finally:
        failed = request.node.stash.get(_FAILED, False)
        for i, cluster in enumerate(made):
            if failed:
                target = ARTIFACTS / f"{request.node.name}-{i}"
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(cluster.root / "logs", target / "logs", dirs_exist_ok=True)
                for extra in (cluster.root / "pg" / "postgres.log", cluster.root / "redis" / "redis.log"):
                    if extra.exists():
                        shutil.copy(extra, target / extra.name)
                (target / "timeline.txt").write_text("".join(f"{t:.3f} {what}\n" for t, what in cluster.timeline))
            cluster.close()
