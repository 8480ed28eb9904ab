"""A shell run's environment (executor.kinds.shell) and what is left of its processes (leftovers)."""

from __future__ import annotations

import ctypes
import logging
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cronos.errors import ConfigError
from cronos.settings import Settings, load_settings
from executor.kinds.base import RunFailed
from executor.kinds.launcher import descendants, spawn
from executor.kinds.leftovers import select
from executor.kinds.shell import (
    LAUNCHER,
    PIPE_GRACE_S,
    RunAs,
    child_env,
    env_refusal,
    launcher_argv,
    prepare,
    run_as,
)

PR_GET_DUMPABLE = 3


def test_child_env_is_the_fixed_base_then_the_jobs_env() -> None:
    assert child_env({}, "/home/cronos") == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/cronos",
        "LANG": "C.UTF-8",
    }
    assert child_env({"LANG": "de_DE.UTF-8", "X": "1"}, "/h")["LANG"] == "de_DE.UTF-8"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PATH": "/evil"}, "'PATH'"),
        ({"LD_PRELOAD": "x.so"}, "'LD_PRELOAD'"),
        ({"LD_LIBRARY_PATH": "/x"}, "'LD_LIBRARY_PATH'"),
        ({"PYTHONSTARTUP": "x.py"}, "'PYTHONSTARTUP'"),
        ({"OK": "1", "A=B": "x"}, "'A=B'"),
        ({"": "x"}, "''"),
        ({"A\x00B": "x"}, "'A\\x00B'"),
        ({"OK": "a\x00b"}, "'OK'"),
    ],
)
def test_env_refusal_names_the_key(env: dict[str, str], named: str) -> None:
    refusal = env_refusal(env)
    assert refusal is not None and named in refusal


def test_env_refusal_lets_ordinary_names_through() -> None:
    assert env_refusal({"MY_PATH": "/x", "path": "/x", "HOME": "/h", "LANG": "C", "OLD_LD_X": "1"}) is None


def test_select_finds_the_session_descendants_and_pipe_holders() -> None:
    table = {
        1: (0, 1),  # init
        100: (1, 100),  # the run's child, leading its session
        101: (100, 100),  # in its group
        102: (100, 102),  # escaped with setsid, parent alive
        103: (102, 102),  # forked by the escaped one
        104: (1, 100),  # orphaned, still in the session
        200: (1, 200),  # escaped, orphaned: found only as a pipe holder
        201: (200, 200),
        300: (1, 300),  # unrelated
    }
    assert select(table, 100, holders={200}) == {100, 101, 102, 103, 104, 200, 201}
    assert select(table, 100, holders=()) == {100, 101, 102, 103, 104}
    assert select(table, 999, holders={12345}) == set()  # gone: nothing, and no unknown pid


# --- the launcher and the shell user (issue 22, item 11) ----------------------------------


def test_launcher_argv_runs_the_script_isolated_with_the_ids_then_the_command() -> None:
    argv = launcher_argv(["echo", "--", "hi"], 7, 1234, None)
    assert argv[:4] == [sys.executable, "-I", "-S", LAUNCHER] and Path(LAUNCHER).is_file()
    assert argv[4:] == ["7", str(PIPE_GRACE_S), "1234", "-1", "-1", "", "--", "echo", "--", "hi"]
    nobody = RunAs(uid=65534, gid=65534, groups=(65534, 100), home="/nonexistent")
    assert launcher_argv(["id"], 3, 1, nobody)[7:] == ["65534", "65534", "65534,100", "--", "id"]


def test_run_as_names_an_unknown_user_and_skips_the_executors_own() -> None:
    with pytest.raises(RunFailed, match="CRONOS_SHELL_USER 'no-such-user-x' is not a user on this host"):
        run_as("no-such-user-x")
    assert run_as("") is None
    assert run_as(pwd.getpwuid(os.geteuid()).pw_name) is None  # no switch to oneself


@pytest.mark.skipif(os.geteuid() != 0, reason="the root executor's case")
def test_prepare_warns_a_root_executor_without_a_shell_user(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    prepare(Settings(allow_shell=True))
    assert [r.levelname for r in caplog.records if getattr(r, "event", None) == "executor.shell_as_root"] == ["WARNING"]
    assert ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0  # /proc/<executor>/environ: root's only
    caplog.clear()
    prepare(Settings(allow_shell=True, shell_user="nobody"))
    prepare(Settings(allow_shell=False))
    assert not [r for r in caplog.records if getattr(r, "event", None) == "executor.shell_as_root"]


def test_prepare_refuses_an_unknown_shell_user() -> None:
    with pytest.raises(ConfigError, match="CRONOS_SHELL_USER 'no-such-user-x'"):
        prepare(Settings(allow_shell=True, shell_user="no-such-user-x"))
    prepare(Settings(allow_shell=False, shell_user="no-such-user-x"))  # no shell jobs: not looked at


@pytest.mark.parametrize("raw", ["a b", "x:y", "a/b", "\x07"])
def test_shell_user_setting_refuses_what_is_no_user_name(raw: str) -> None:
    with pytest.raises(ConfigError, match="CRONOS_SHELL_USER"):
        load_settings({"CRONOS_SHELL_USER": raw}, env_file=None)
    assert load_settings({"CRONOS_SHELL_USER": " nobody "}, env_file=None).shell_user == "nobody"


def test_launcher_finds_every_descendant_in_proc() -> None:
    """Real processes: a child and its grandchild, found from this process."""
    with subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE) as parent:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        try:
            found = descendants(os.getpid())
            assert parent.pid in found and grandchild in found
            assert found.index(parent.pid) < found.index(grandchild)  # parents first
        finally:
            os.kill(grandchild, signal.SIGKILL)
            parent.kill()


@pytest.mark.parametrize("program", ["no-such-program-x", "/etc", "/etc/passwd", "./no/such"])
def test_launcher_spawn_words_an_exec_failure_as_subprocess_does(program: str) -> None:
    with pytest.raises(OSError) as ours:
        spawn([program], None)
    with pytest.raises(OSError) as theirs:
        subprocess.Popen([program])
    assert str(ours.value) == str(theirs.value)


def test_launcher_spawn_starts_the_command_in_a_process_group_of_its_own() -> None:
    pid = spawn(["sleep", "30"], None)
    try:
        assert os.getpgid(pid) == pid != os.getpgid(0)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
