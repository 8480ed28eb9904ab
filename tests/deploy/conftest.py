"""Fixtures of the deploy tests that start processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.processes import Processes


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    made = Processes(tmp_path)
    yield made
    made.kill_all()
