"""The Promela model of the run protocol (tests/model/lifecycle.pml), checked by spin.

Each verification builds the model with spin, compiles the verifier (pan) and searches the whole
state space: the correct protocol must verify with no error and a complete search; each seeded bug
must be found (the assertion it breaks is named). The model's names must be those of
cronos.lifecycle: its mtype is RunState, its `ev_<event>` inlines are Event, each with the from-
and to-states of lifecycle.TRANSITIONS.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cronos.lifecycle import TRANSITIONS, Event
from cronos.models import RunState

# A verification takes 3-45 s here; the suite's 60 s would cut the largest short on a slower machine.
pytestmark = pytest.mark.timeout(600)

MODEL = Path(__file__).with_name("lifecycle.pml")
MAX_DEPTH = 20_000  # the deepest search is ~650 steps; pan must report it was not cut short

# Fault sets for the two-fault builds (MAXF=2), as OFF masks of the faults *not* enabled.
F = {
    "redis": 1,
    "leader_pause": 2,
    "executor_pause": 4,
    "stop": 8,
    "spurious_watchdog": 16,
    "expiry": 32,
    "hand_over": 64,
    "extra_run": 128,
    "replace": 256,
    "cancel": 512,
}


def off(*enabled: str) -> str:
    return f"-DOFF={sum(F.values()) - sum(F[name] for name in enabled)}"


@dataclass
class Pan:
    defines: tuple[str, ...]
    output: str
    seconds: float
    trail: str = ""

    def _number(self, pattern: str) -> int:
        found = re.search(pattern, self.output)
        return int(float(found.group(1))) if found else -1

    @property
    def errors(self) -> int:
        return self._number(r"errors: (\d+)")

    @property
    def states(self) -> int:
        return self._number(r"([\d.e+]+) states, stored")

    @property
    def depth(self) -> int:
        return self._number(r"depth reached (\d+)")

    @property
    def violated(self) -> str:
        found = re.search(r"assertion violated (.*?) \(at depth", self.output)
        return found.group(1) if found else ""

    def summary(self) -> str:
        lines = [line for line in self.output.splitlines() if not line.startswith("Depth=")]
        head = f"spin {' '.join(self.defines)}: {self.states} states, depth {self.depth}, {self.seconds:.1f} s"
        return "\n".join([head, *lines[:60], self.trail])


def verify(tmp_path: Path, *defines: str, optimize: str = "-O2") -> Pan:
    spin = shutil.which("spin")
    if spin is None:
        pytest.skip("spin is not installed: apt-get install spin")
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    shutil.copy(MODEL, work / MODEL.name)
    started = time.monotonic()

    def run(*cmd: str, timeout: float = 600) -> str:
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 and cmd[0] != "./pan":
            raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout + done.stderr

    run(spin, *defines, "-a", MODEL.name)
    run("gcc", optimize, "-w", "-DSAFETY", "-o", "pan", "pan.c")
    output = run("./pan", f"-m{MAX_DEPTH}", "-w24")
    pan = Pan(defines, output, time.monotonic() - started)
    if (work / f"{MODEL.name}.trail").exists():
        pan.trail = steps(run(spin, *defines, "-t", "-p", MODEL.name))
    print(pan.summary())
    return pan


def steps(trail: str) -> str:
    """A spin trail as one line per atomic step taken: its number, process and source line."""
    source = MODEL.read_text().splitlines()
    shown, last = [], None
    for line in trail.splitlines():
        found = re.match(r"\s*(\d+):\s+proc\s+(\d+) \((\w+):\d+\) \S+:(\d+) ", line)
        if "assertion violated" in line:
            shown.append(line.strip())
        if not found:
            continue
        step, pid, name, number = found.groups()
        code = source[int(number) - 1].strip()
        if (pid, number) != last and (code.startswith((":: atomic", "inline ev_")) or "assert" in code):
            shown.append(f"{step:>5} {name}[{pid}] {number}: {code[:100]}")
        last = (pid, number)
    return "trail:\n" + "\n".join(shown)


def assert_verified(pan: Pan) -> None:
    assert pan.errors == 0, pan.summary()
    assert "max search depth too small" not in pan.output, pan.summary()
    assert "Search not completed" not in pan.output, pan.summary()
    assert "Full statespace search" in pan.output and "Bit statespace" not in pan.output, pan.summary()
    assert 0 < pan.depth < MAX_DEPTH and pan.states > 0, pan.summary()


def assert_found(pan: Pan, assertion: str) -> None:
    assert pan.errors >= 1, pan.summary()
    assert assertion in pan.violated, pan.summary()


G5 = "(my[me]==epoch)"
START = "((st[r]==8)&&(owner[r]==me))"  # ev_started's guard: reserved (its mtype number), its own
MISFIRE = "(stale_ran!=3)"
NO_LOST_TICK = (
    "((((st[i]!=6)&&(st[i]!=5))&&(st[i]!=8))&&(st[i]!=4))"  # queued, waiting, reserved, running (mtype numbers)
)


# --- the correct protocol ---------------------------------------------------------------


def test_the_protocol_verifies_against_every_single_fault(tmp_path: Path) -> None:
    """G1, G3, G5, misfire and no lost tick, with any one fault (MAXF=1) anywhere, or none."""
    pan = verify(tmp_path, "-DMAXF=1", "-DCOVERAGE")  # COVERAGE: pan prints each event taken
    assert_verified(pan)
    taken = set(re.findall(r"^taken: (\w+)$", pan.output, flags=re.M))
    assert taken == {event.value for event in Event}, f"never taken: {set(Event) - taken}"


def test_the_finishers_wake_and_the_claims_look_again_suffice_against_every_other_single_fault(
    tmp_path: Path,
) -> None:
    """Without the sweep: no waiter lost whatever one fault happens, but an executor's pause or
    death (the finding below) and a change of the job that takes back a reserved run (queued
    again: a run waiting behind it is woken by the sweep, as behind a run its executor gives back)."""
    assert_verified(
        verify(tmp_path, "-DMAXF=1", "-DNO_SWEEP", off(*(f for f in F if f not in ("executor_pause", "hand_over"))))
    )


@pytest.mark.parametrize(
    "faults",
    [
        # Any two of these (~2.9M states each build). The pairs left out (Redis with a pause, a stop
        # or the extra run; a leader pause with an executor pause, a stop or the extra run) make
        # 5-30M states each: `spin -DMAXF=2` (all faults, any two) verifies offline, 121M states.
        ("executor_pause", "stop", "spurious_watchdog", "expiry", "hand_over", "replace", "extra_run"),
        ("redis", "expiry", "hand_over", "replace"),
        ("leader_pause", "spurious_watchdog", "expiry", "hand_over", "replace"),
    ],
    ids=lambda faults: "+".join(faults),
)
def test_the_protocol_verifies_against_two_faults(tmp_path: Path, faults: tuple[str, ...]) -> None:
    assert_verified(verify(tmp_path, "-DMAXF=2", off(*faults)))


# --- seeded bugs: spin must find each ----------------------------------------------------


def test_outbox_before_the_catch_up_runs_two_stale_ticks(tmp_path: Path) -> None:
    """The old order: the new leader's outbox pushes stale tick 0 (then the newest written) before
    it writes tick 1, which runs too: under run_once two late ticks run."""
    assert_found(verify(tmp_path, "-DMAXF=1", "-DBUG_DOUBLE_RUN"), MISFIRE)


def test_an_unfenced_leader_write_breaks_g5(tmp_path: Path) -> None:
    """A leader whose lock went (with Redis' data, or while it was paused) still acts while another
    won the lock and incremented the epoch: without the epoch check its write is accepted."""
    assert_found(verify(tmp_path, "-DMAXF=1", "-DBUG_UNFENCED"), G5)


def test_a_wake_decided_before_the_finish_loses_a_waiter(tmp_path: Path) -> None:
    """The finisher reads "nobody waits", a claim then waits behind its still running run, the
    finish commits and wakes nobody: the waiting run stays waiting (no sweep to rescue it)."""
    assert_found(verify(tmp_path, "-DMAXF=0", "-DBUG_WAKE_SAME_SNAPSHOT", "-DNO_SWEEP"), NO_LOST_TICK)


def test_a_claim_that_does_not_look_again_loses_a_waiter(tmp_path: Path) -> None:
    """A claim reads its job's run running (its end not committed yet) and records a wait after
    that end's wake has read "nobody waits": unless the claim looks again once the end commits
    (waiters.wake_free), the run stays waiting with nothing ahead (no sweep to rescue it)."""
    assert_found(verify(tmp_path, "-DMAXF=0", "-DBUG_NO_RECHECK", "-DNO_SWEEP"), NO_LOST_TICK)


def test_a_reaped_run_that_wakes_nobody_strands_its_waiter(tmp_path: Path) -> None:
    """The reaper ends a run whose executor is gone; a run waiting behind it is woken only by that
    end's wake (without the sweep): the reaper's transaction must wake like a finish does."""
    assert_found(verify(tmp_path, "-DMAXF=1", off("executor_pause"), "-DBUG_REAP_NO_WAKE", "-DNO_SWEEP"), NO_LOST_TICK)


@pytest.mark.parametrize("fault", ["hand_over", "cancel", "executor_pause"])
def test_a_reserved_run_started_without_asking_may_have_been_taken_back(tmp_path: Path, fault: str) -> None:
    """Between its reservation and its due instant the API takes the run back (an edit or a pause
    of its job: queued again; a cancel: ended) or the reaper releases it (its executor paused past
    its lease): started without asking whether it is still reserved by this executor, it would run
    though cancelled or handed over, or beside the claim of it as a queued run. The start is a
    statement guarded by the run's state and owner (RUNS_START)."""
    assert_found(verify(tmp_path, "-DMAXF=1", off(fault), "-DBUG_START_UNCHECKED"), START)


# --- findings: what spin showed of the design --------------------------------------------


def test_without_the_sweep_a_waiter_behind_a_woken_run_that_ends_unrun_is_stranded(tmp_path: Path) -> None:
    """Two runs wait behind a running one; its end wakes the earliest, which then ends without
    running (expired here; misfired or handed over alike): nothing wakes the other. The sweep is
    needed, not only a safety net; with it the same faults verify."""
    assert_found(verify(tmp_path, "-DMAXF=2", off("extra_run", "expiry"), "-DNO_SWEEP"), NO_LOST_TICK)
    assert_verified(verify(tmp_path, "-DMAXF=2", off("extra_run", "expiry")))


def test_without_the_sweep_an_executor_dying_between_its_wait_and_its_look_again_strands_the_run(
    tmp_path: Path,
) -> None:
    """A claim locks nothing (a lock a finish or a heartbeat waits for deadlocked under load), so
    its wait and its look again are two statements: an executor that dies between them, after the
    end it waited for read "nobody waits", leaves the run waiting with nothing ahead. The sweep
    wakes it (the single-fault verification above has it)."""
    assert_found(verify(tmp_path, "-DMAXF=1", off("executor_pause"), "-DNO_SWEEP"), NO_LOST_TICK)


def test_a_token_in_flight_across_a_late_takeover_expires_at_its_claim(tmp_path: Path) -> None:
    """A token read before an outage and claimed after it (past the grace) must not run its tick
    besides the one run_once keeps: the claim expires it (lifecycle.expired). Spin found the
    double run while the misfire rule was applied only where a token is pushed."""
    assert_verified(verify(tmp_path, "-DMAXF=1", "-DSTALE_IN_FLIGHT"))
    assert_found(verify(tmp_path, "-DMAXF=1", "-DSTALE_IN_FLIGHT", "-DBUG_CLAIM_NO_EXPIRY"), MISFIRE)


# --- the model's names are cronos.lifecycle's ----------------------------------------------


def model_text() -> str:
    return re.sub(r"/\*.*?\*/", "", MODEL.read_text(), flags=re.S)


def inlines() -> dict[str, str]:
    """name -> body of each inline of the model."""
    text = model_text()
    found = {}
    for match in re.finditer(r"inline (\w+)\([^)]*\)\s*\{", text):
        depth, at = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[at], 0)
            at += 1
        found[match.group(1)] = text[match.end() : at - 1]
    return found


def test_run_states_are_lifecycles() -> None:
    mtypes = re.findall(r"mtype\s*=\s*\{([^}]*)\}", model_text())
    assert len(mtypes) == 1, "one mtype: the run states"
    names = [name.strip() for name in mtypes[0].split(",")]
    assert len(names) == len(set(names)) and set(names) == {state.value for state in RunState}


def test_events_are_lifecycles_with_their_transitions() -> None:
    events = {name.removeprefix("ev_"): body for name, body in inlines().items() if name.startswith("ev_")}
    assert set(events) == {event.value for event in Event}
    for transition in TRANSITIONS:
        body = events[transition.event.value]
        guard = re.search(r"assert\(([^;]*)\)", body)
        assert guard, f"ev_{transition.event} asserts no from-state"
        sources = set(re.findall(r"st\[[^\]]*\] == (\w+)", guard.group(1))) - {"NEW"}
        assert sources == {s.value for s in transition.sources}, f"ev_{transition.event}: from {sources}"
        targets = set(re.findall(r"st\[[^\]]*\] = (\w+)", body)) or sources
        assert targets == {transition.target.value}, f"ev_{transition.event}: to {targets}"


def test_every_event_is_used_by_a_process() -> None:
    text, bodies = model_text(), inlines()
    callers = text[text.index("proctype") :]
    used = {name for name in bodies if re.search(rf"\b{name}\(", callers)}
    while True:  # and through the helper inlines they call
        more = {other for name in used for other in bodies if re.search(rf"\b{other}\(", bodies[name])}
        if more <= used:
            break
        used |= more
    assert {f"ev_{event.value}" for event in Event} <= used
