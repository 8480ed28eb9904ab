"""The benchmarks' task: its `--task` payloads, and the CPU it burns."""

from __future__ import annotations

import time

import pytest

from cronos.bench.counter import COUNTER_TASK, spin_cpu, task_payload


def test_task_payloads() -> None:
    assert task_payload("noop") == {"action": COUNTER_TASK}
    assert task_payload("cpu:4ms") == {"action": COUNTER_TASK, "cpu_ms": 4.0}
    assert task_payload("cpu:0.5ms") == {"action": COUNTER_TASK, "cpu_ms": 0.5}


@pytest.mark.parametrize("spec", ["cpu", "cpu:4", "cpu:0ms", "cpu:-1ms", "cpu:xms", "sleep:4ms", "cpu:20000ms", ""])
def test_bad_task_specs_are_refused_by_name(spec: str) -> None:
    with pytest.raises(ValueError, match="expected noop or cpu:<N>ms"):
        task_payload(spec)


def test_spin_burns_at_least_its_cpu_time() -> None:
    before = time.thread_time()
    spin_cpu(5)
    assert time.thread_time() - before >= 0.005
