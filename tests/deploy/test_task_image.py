"""deploy/README.md "Your tasks": the Dockerfile a user copies to add their task package is built
FROM the Cronos image and installs into the virtualenv deploy/Dockerfile makes, as the user the
image runs as (no image is built here: tests/deploy's image test builds the Cronos one)."""

from __future__ import annotations

import re

from tests.deploy.manifests import DEPLOY


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments left out."""
    lines = [line.strip() for line in text.splitlines() if not line.strip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [(op.upper(), arg) for op, _, arg in (line.partition(" ") for line in joined.splitlines() if line)]


def _task_image() -> list[tuple[str, str]]:
    blocks = re.findall(r"```dockerfile\n(.*?)```", (DEPLOY / "README.md").read_text(), re.S)
    assert len(blocks) == 1, "deploy/README.md shows one task image Dockerfile"
    return _instructions(blocks[0])


def test_the_task_image_installs_into_the_cronos_virtualenv_and_runs_as_its_user() -> None:
    cronos = _instructions((DEPLOY / "Dockerfile").read_text())
    venv = next(m[1] for op, arg in cronos if op == "RUN" and (m := re.search(r"-m venv (\S+)", arg)))
    user = [arg for op, arg in cronos if op == "USER"][-1]
    ours = _task_image()
    assert ours[0][0] == "FROM" and "cronos" in ours[0][1]
    assert any(op == "RUN" and f"{venv}/bin/pip install" in arg for op, arg in ours), venv
    assert [arg for op, arg in ours if op == "USER"][-1] == user, "the image's own user, not root"


def test_the_check_can_fail() -> None:
    """Negative control: a task image that stays root, or pip-installs elsewhere, is caught."""
    root = _instructions("FROM ghcr.io/acme/cronos:0.1.0\nUSER root\nRUN pip install /src/myapp\n")
    assert [arg for op, arg in root if op == "USER"][-1] != "cronos:cronos"
    assert not any(op == "RUN" and "/opt/cronos/bin/pip install" in arg for op, arg in root)
