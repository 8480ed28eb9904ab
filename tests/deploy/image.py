"""The Cronos image, built from deploy/Dockerfile with podman and run with buildah (no Docker engine here).

Docker Hub is out of reach and `podman run` cannot start containers on these machines, so:
- the base images come from Debian's packages and stay in podman's storage (built once, then reused):
  `localhost/debian:bookworm` (debootstrap --variant=minbase) and, FROM it, a stand-in for
  `python:3.11-slim-bookworm` with Debian's python3 (3.11 on bookworm), python3-venv and python3-pip;
- `podman build --isolation chroot --pull=never` builds the image; pip inside the build trusts the
  host's CA bundle through the Dockerfile's `ca` build secret (never copied into the image);
- `buildah run --isolation chroot --network host CONTAINER -- cronos ROLE` runs a role, reaching
  the local PostgreSQL and Redis.

`python -m tests.deploy.image start` (the Makefile's `test`, before lint) starts the build in the
background so the image is ready when tests/deploy/test_image.py runs: the test takes that build's
image (once), or builds itself (every layer cached: seconds) when none was started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from tests.deploy.manifests import ROOT, VERSION

DEBIAN = "localhost/debian:bookworm"
PYTHON = "localhost/python:3.11-slim-bookworm"  # what the Dockerfile's FROM python:3.11-slim-bookworm finds
IMAGE = "localhost/cronos:test"
MIRROR = "http://deb.debian.org/debian"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
STATE = ROOT / "artifacts" / "image"
TOOLS = ("podman", "buildah", "debootstrap")
# What Debian's docker images leave out too (no docs, man pages or translations in an image).
SLIM = ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info")
PYTHON_CONTAINERFILE = """\
FROM {debian}
RUN apt-get update -qq \\
    && apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip >/dev/null \\
    && ln -s /usr/bin/python3 /usr/bin/python \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
"""


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0


def _run(argv: list[str], log: IO[str], stdin: IO[bytes] | None = None, cwd: Path | None = None) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=stdin, cwd=cwd, check=True)


def _build_debian(log: IO[str]) -> None:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", "bookworm", str(root), MIRROR], log)
        for path in ("var/cache/apt/archives", "var/lib/apt/lists", *SLIM):
            for child in (root / path).glob("*"):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                elif child.name != "lock":
                    child.unlink()
        (root / "etc/dpkg/dpkg.cfg.d/01-slim").write_text("".join(f"path-exclude /{p}/*\n" for p in SLIM))
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        _run(["podman", "import", "-q", "-", DEBIAN], log, stdin=tar.stdout)
        if tar.wait() != 0:
            raise RuntimeError("tar of the debootstrap root failed")


def _build_python(log: IO[str]) -> None:
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "Containerfile").write_text(PYTHON_CONTAINERFILE.format(debian=DEBIAN))
        _run(["podman", "build", "--isolation", "chroot", "--pull=never", "-t", PYTHON, context], log)


def build_args() -> list[str]:
    """The Dockerfile's build options as a build machine behind a TLS-inspecting proxy passes them."""
    args = ["--build-arg", f"VERSION={VERSION}"]
    if CA_BUNDLE.is_file():
        args += ["--secret", f"id=ca,src={CA_BUNDLE}"]
    return args


def build(log: IO[str]) -> dict[str, float]:
    """Base images (when podman's storage lacks them) then the image; the seconds each step took."""
    seconds: dict[str, float] = {}
    for name, image, step in (("debian", DEBIAN, _build_debian), ("python", PYTHON, _build_python)):
        if not exists(image):
            started = time.monotonic()
            step(log)
            seconds[name] = round(time.monotonic() - started, 1)
    started = time.monotonic()
    _run(
        ["podman", "build", "--isolation", "chroot", "--pull=never", "--format", "docker", *build_args(),
         "-t", IMAGE, "-f", "deploy/Dockerfile", "."],
        log, cwd=ROOT,
    )  # fmt: skip
    seconds["image"] = round(time.monotonic() - started, 1)
    return seconds


def start_in_background() -> None:
    """Start `build` detached (its log and result under artifacts/image/); do nothing without the tools."""
    if missing_tools():
        print(f"image: not built in the background, missing {' '.join(missing_tools())}")
        return
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "result.json").unlink(missing_ok=True)
    with (STATE / "build.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.deploy.image", "build"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    (STATE / "build.pid").write_text(str(proc.pid))
    print(f"image: building in the background (pid {proc.pid}, log {STATE / 'build.log'})")


def wait_for_background(timeout: float) -> dict[str, object] | None:
    """The result of the build `start_in_background` began, once it ends, for its first taker only: None
    when none was started since the last taker, or when it died without a result."""
    pid_file, result = STATE / "build.pid", STATE / "result.json"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + timeout
    while not result.exists() and _alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"the background image build (pid {pid}) still runs after {timeout}s")
        time.sleep(1)
    pid_file.unlink(missing_ok=True)
    found: dict[str, object] | None = json.loads(result.read_text()) if result.exists() else None
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours is not running: /proc says so (Z), and it is not our child to reap here.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@contextmanager
def container(name_hint: str) -> Iterator[str]:
    """A buildah working container of IMAGE (removed afterwards)."""
    name = f"cronos-test-{name_hint}-{os.getpid()}"
    subprocess.run(["buildah", "rm", name], capture_output=True, check=False)
    made = subprocess.run(["buildah", "from", "--pull=never", "--name", name, IMAGE], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def run_argv(ctr: str, args: list[str], env: dict[str, str]) -> list[str]:
    """`buildah run` of one command in a working container, on the host's network, with `env` on top of
    the image's environment."""
    pairs = [arg for key, value in sorted(env.items()) for arg in ("--env", f"{key}={value}")]
    return ["buildah", "run", "--isolation", "chroot", "--network", "host", *pairs, ctr, "--", *args]


def _write_result(result: dict[str, object]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    partial = STATE / "result.json.part"
    partial.write_text(json.dumps(result))
    partial.replace(STATE / "result.json")  # whole or absent for a waiting test


def main(argv: list[str]) -> int:
    if argv == ["start"]:
        start_in_background()
        return 0
    if argv == ["build"]:
        started = time.monotonic()
        try:
            seconds = build(sys.stdout)
        except (subprocess.CalledProcessError, RuntimeError) as exc:
            print(f"image: build failed: {exc}")
            _write_result({"failed": str(exc)})
            return 1
        result = {"seconds": seconds, "total": round(time.monotonic() - started, 1)}
        _write_result(result)
        print(f"image: built {IMAGE}: {json.dumps(result)}")
        return 0
    print("usage: python -m tests.deploy.image start|build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
