"""The cluster's own PostgreSQL and redis-server, started from the installed binaries.

Each cluster gets private servers on free ports in a temporary directory, so a test can
crash and restart them without touching the machine's shared services. PostgreSQL is
initialised and migrated once per process (a template data directory) and copied per
cluster: a copy takes a quarter of a second, `initdb` plus migrations over a second.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.waiting import block_until

REPO = Path(__file__).resolve().parents[2]
DB_NAME = "cronos"
# Test-only instrumentation installed in the template after the migrations: every change of a
# run's state, stamped by clock_timestamp() in an AFTER trigger, i.e. after the unique-index
# checks (and any wait on them) and before commit. That orders a claim after the finish it
# waited for, which the product's now() (transaction start) does not (checker G3).
AUDIT_SQL = """
CREATE TABLE chaos_transitions (
    run_id bigint NOT NULL, old_state text, new_state text NOT NULL, at timestamptz NOT NULL
);
CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_transitions VALUES (NEW.id, OLD.state, NEW.state, clock_timestamp());
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit AFTER UPDATE OF state ON runs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION chaos_audit();
"""
_template_lock = threading.Lock()
_template_dir: Path | None = None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cronos_command() -> list[str]:
    """The `cronos` CLI of the interpreter running the tests (the venv's)."""
    script = Path(sys.executable).parent / "cronos"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cronos.cli"]


def pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("pg_ctl")
    if which:
        return Path(which).parent
    raise RuntimeError("no PostgreSQL binaries (pg_ctl) found under /usr/lib/postgresql/*/bin or on PATH")


def _as_postgres(argv: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _give_to_postgres(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _run(argv: list[str], what: str, timeout: float = 60) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stdout}{done.stderr}")


class PgServer:
    """A private PostgreSQL cluster: start, clean restart, crash (immediate stop)."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.data = root / "data"
        self.sock = root / "sock"
        self.logfile = root / "postgres.log"
        self.port = port or free_port()
        self.bin = pg_bin()

    def dsn_of(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def dsn(self) -> str:
        return self.dsn_of(DB_NAME)

    @property
    def admin_dsn(self) -> str:
        return self.dsn_of("postgres")

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _give_to_postgres(self.root)
        initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync"]
        _run(_as_postgres([*initdb, "-E", "UTF8"]), "initdb")

    def _ctl(self, *args: str, timeout: float = 60) -> None:
        _run(_as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), *args]), f"pg_ctl {args[0]}", timeout)

    def _options(self) -> str:
        # fsync=off is safe for a crash of PostgreSQL alone (the OS keeps its page cache);
        # synchronous_commit must stay on, or an immediate stop loses acknowledged commits.
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off"
        return opts + " -c full_page_writes=off -c max_connections=200"

    def start(self) -> None:
        self.sock.mkdir(exist_ok=True)
        _give_to_postgres(self.sock)
        if not self.logfile.exists():
            self.logfile.touch()
            _give_to_postgres(self.logfile)
        self._ctl("-l", str(self.logfile), "-o", self._options(), "-w", "-t", "30", "start")

    def restart(self) -> None:
        """Clean restart: connections are closed, committed data survives."""
        self._ctl("-l", str(self.logfile), "-o", self._options(), "-m", "fast", "-w", "-t", "30", "restart")

    def crash(self) -> None:
        """Immediate stop: no shutdown checkpoint, crash recovery on the next start."""
        self._ctl("-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._ctl("-m", "immediate", "-w", "stop", timeout=20)

    def is_up(self) -> bool:
        done = subprocess.run(
            [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True, check=False
        )
        return done.returncode == 0


def migrated_template() -> Path:
    """A data directory with the `cronos` database migrated, made once per process."""
    global _template_dir
    with _template_lock:
        if _template_dir is not None and _template_dir.exists():
            return _template_dir
        root = Path(tempfile.mkdtemp(prefix="cronos-pgtpl-"))
        root.chmod(0o755)
        atexit.register(shutil.rmtree, root, True)
        server = PgServer(root)
        server.init()
        server.start()
        try:
            _run(
                [str(server.bin / "createdb"), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", DB_NAME],
                "createdb",
            )
            # WARNING: quiet (it also kept clear of finding F3, a logging KeyError, now fixed).
            env = {**os.environ, "DATABASE_URL": server.dsn, "CRONOS_LOG_FORMAT": "text", "CRONOS_LOG_LEVEL": "WARNING"}
            done = subprocess.run(
                [*cronos_command(), "migrate"], env=env, cwd=root, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"cronos migrate failed: {done.stderr}")
            psql = [str(server.bin / "psql"), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres"]
            _run([*psql, "-d", DB_NAME, "-v", "ON_ERROR_STOP=1", "-q", "-c", AUDIT_SQL], "audit trigger")
        finally:
            server._ctl("-m", "fast", "-w", "stop")
        _template_dir = server.data
        return _template_dir


def pg_from_template(root: Path) -> PgServer:
    """A PostgreSQL server whose data directory is a copy of the migrated template (not started).

    The parents of `root` must be traversable by the postgres user.
    """
    root.mkdir(parents=True, exist_ok=True)
    _give_to_postgres(root)
    server = PgServer(root)
    # `cp -a` keeps owners and modes (postgres insists on owning a 0700 data directory) and is
    # three times faster than shutil.copytree plus chown -R.
    _run(["cp", "-a", str(migrated_template()), str(server.data)], "copy of the template data directory")
    (server.data / "postmaster.pid").unlink(missing_ok=True)
    return server


class RedisServer:
    """A private redis-server without persistence: a restart loses every key."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.logfile = root / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.root), "--logfile", str(self.logfile)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc, what = self.proc, f"redis-server to start on port {self.port} (see {self.logfile})"
        block_until(lambda: self.is_up() or proc.poll() is not None, what=what)
        if not self.is_up():
            raise RuntimeError(f"redis-server exited with {proc.returncode}; see {self.logfile}")

    def is_up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        """Kill, stay down `down_s`, start again on the same port: every key, the stream and its group are gone."""
        self.kill()
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        self.kill()
