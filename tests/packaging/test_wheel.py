"""`pip install` of the built wheel gives a working `cronos` (issue 23, item 2): the wheel is built
from this checkout, installed with its runtime dependencies only into a fresh venv (no system site
packages, cwd outside the checkout so nothing of it is importable), and run.

One test: the build and the install take most of its time (~20-60 s, the packages from the index)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("cronos", "api", "dispatcher", "executor")
# What the build reads; copied, so the build's own build/ and *.egg-info stay out of the checkout.
SOURCES = ("pyproject.toml", "README.md", "LICENSE", *ROLES)
# What only `make test` installs: none of it may be a dependency of the wheel.
TOOLCHAIN = ("pytest", "mypy", "ruff", "selenium", "schemathesis", "testcontainers", "hypothesis")
CRONTAB = "MAILTO=ops@example.com\n0 3 * * * /usr/local/bin/backup.sh --full\n"
# Modules that need an extra (pyproject's optional-dependencies), imported only when it is there.
NEEDS_EXTRA = {"executor.otel": "opentelemetry"}
# Every module of the four packages imports in the installed copy (not the checkout's); one that needs
# an extra fails for want of that extra's package only.
IMPORT_ALL = f"""
import importlib, pkgutil, sys
names = []
for package in sys.argv[1:]:
    root = importlib.import_module(package)
    assert root.__file__.startswith(sys.prefix), (package, root.__file__)
    names.append(package)
    names += [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
extras = {NEEDS_EXTRA!r}
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if name not in extras or exc.name.split(".")[0] != extras[name]:
            raise
print(len(names))
"""


def _run(*argv: str | Path, cwd: Path, stdin: str | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.timeout(600)
def test_the_built_wheel_installs_a_working_cronos(tmp_path: Path) -> None:
    source, dist = tmp_path / "source", tmp_path / "dist"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", dist, source],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if build.returncode != 0:
        pytest.skip(f"the wheel cannot be built here (pip wheel: exit {build.returncode}): {build.stderr[-500:]}")
    (wheel,) = dist.glob("cronos-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "cronos/store/migrations").glob("*.sql")}
    shipped |= {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "api/ui").rglob("*")
        if p.suffix in (".html", ".js", ".css") and p.is_file()
    }
    assert len([s for s in shipped if s.endswith(".sql")]) >= 10 and "api/ui/index.html" in shipped
    assert shipped <= names, f"package data missing from the wheel: {sorted(shipped - names)}"
    assert not [n for n in names if n.startswith(("tests/", "cronos/bench/"))]
    assert "License-Expression: Apache-2.0" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    _run(venv / "bin/python", "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)
    installed = _run(venv / "bin/python", "-m", "pip", "list", "--format=freeze", cwd=tmp_path).lower()
    assert not [t for t in TOOLCHAIN if f"\n{t}==" in f"\n{installed}"], installed

    cronos = venv / "bin/cronos"
    assert "migrate" in _run(cronos, "--help", cwd=tmp_path)
    for command in ("migrate", "api", "dispatcher", "executor", "dev", "jobs", "apply", "token", "import"):
        assert "usage: cronos" in _run(cronos, command, "--help", cwd=tmp_path)
    converted = _run(cronos, "import", "crontab", "-", cwd=tmp_path, stdin=CRONTAB)
    assert "argv:\n      - /usr/local/bin/backup.sh\n      - --full" in converted
    assert int(_run(venv / "bin/python", "-c", IMPORT_ALL, *ROLES, cwd=tmp_path)) > 100
    # The console's files are read from the installed package, as the API serves them.
    page = "from api.routes_ui import UI_DIR, _load; print(sorted(_load(UI_DIR)))"
    assert "'index.html'" in _run(venv / "bin/python", "-c", page, cwd=tmp_path)
