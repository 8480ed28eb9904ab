"""deploy/Dockerfile: checks of its text (tests/deploy/test_image.py builds the image and runs it).

These hold the promises a reader relies on: multi-stage, non-root, one entrypoint for every role,
a healthcheck, and a build context that contains everything the Dockerfile copies.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

from tests.deploy.manifests import DEPLOY, ROOT

DOCKERFILE = (DEPLOY / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _ignored(path: str) -> bool:
    """Rough .dockerignore semantics: last matching pattern wins, `!` re-includes."""
    ignored = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").removeprefix("**/")
        top = path.split("/")[0]
        if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(top, pattern) or path.startswith(pattern + "/"):
            ignored = not negate
    return ignored


def test_multi_stage_and_runtime_stage_is_slim() -> None:
    froms = [arg for op, arg in _instructions() if op == "FROM"]
    assert len(froms) >= 2
    assert any(arg.endswith(" AS build") for arg in froms) and " AS runtime" in froms[-1]
    assert any(arg.startswith("--from=build") for op, arg in _instructions() if op == "COPY")


def test_runs_as_a_non_root_user() -> None:
    ops = _instructions()
    users = [arg for op, arg in ops if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_user = max(i for i, (op, _) in enumerate(ops) if op == "USER")
    assert last_user < next(i for i, (op, _) in enumerate(ops) if op == "ENTRYPOINT")


def test_one_image_for_every_role() -> None:
    ops = dict(_instructions())
    assert json.loads(ops["ENTRYPOINT"]) == ["cronos"]
    assert json.loads(ops["CMD"]) in (["api"], ["dispatcher"], ["executor"])
    assert "3002" in ops["EXPOSE"] and "9102" in ops["EXPOSE"]


def test_healthcheck_uses_the_shipped_probe() -> None:
    check = next(arg for op, arg in _instructions() if op == "HEALTHCHECK")
    assert "/usr/local/bin/cronos-healthcheck" in check
    assert any(
        arg.split()[:2] == ["deploy/healthcheck.py", "/usr/local/bin/cronos-healthcheck"]
        for op, arg in _instructions()
        if op == "COPY"
    )


def test_build_context_holds_every_copied_source() -> None:
    sources = []
    for op, arg in _instructions():
        if op == "COPY" and not arg.startswith("--from"):
            sources.extend(arg.split()[:-1])
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: missing from the repository"
        assert not _ignored(source), f"COPY {source}: excluded by .dockerignore"
    assert _ignored(".venv") and _ignored(".git") and _ignored("tests")


def _files_pyproject_names() -> list[str]:
    """The files `pip install .` reads besides the packages: the readme and the license file(s)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named: list[str] = []
    for key in ("readme", "license"):
        value = project.get(key)
        if isinstance(value, dict) and "file" in value:
            named.append(value["file"])
        elif key == "readme" and isinstance(value, str):
            named.append(value)
    for pattern in project.get("license-files", []):
        named += sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(pattern)) or [pattern]
    return named


def test_the_build_stage_copies_every_file_pyproject_names_before_installing() -> None:
    """The build stage installs from pyproject.toml with only what it copied so far: a readme or a
    license file named there and not copied fails `pip install .` inside the image build."""
    copied: list[str] = []
    for op, arg in _instructions():
        if op == "COPY" and not arg.startswith("--from"):
            copied += arg.split()[:-1]
        if op == "RUN" and "pip wheel" in arg:
            break
    named = _files_pyproject_names()
    assert "README.md" in named
    for name in named:
        assert name in copied, f"pyproject.toml names {name}: COPY it with pyproject.toml in deploy/Dockerfile"
        assert not _ignored(name), f"{name} is excluded by .dockerignore"
