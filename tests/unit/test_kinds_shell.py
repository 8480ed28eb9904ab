"""A shell run's environment (executor.kinds.shell) and what is left of its processes (leftovers)."""

from __future__ import annotations

import pytest

from executor.kinds.leftovers import select
from executor.kinds.shell import child_env, env_refusal


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
