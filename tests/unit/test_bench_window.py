"""`cronos bench e2e`'s report: each executor's share, the delays' quantiles."""

from __future__ import annotations

from cronos.bench.window import delays_text, shares_text, total_cpu_s


def test_shares_are_counts_and_percentages_of_the_total() -> None:
    text = shares_text({"bench-executor-2": 1, "bench-executor-1": 3, "bench-executor-3": 0})
    assert text == "bench-executor-1 3 (75.0%), bench-executor-2 1 (25.0%), bench-executor-3 0 (0.0%)"
    assert shares_text({}) == "none"


def test_delays_text_and_total_cpu() -> None:
    assert delays_text([float(i) for i in range(1, 101)]) == "p50 51.0 ms, p99 100.0 ms, max 100.0 ms"
    assert delays_text([]) == "p50 0.0 ms, p99 0.0 ms, max 0.0 ms"
    assert total_cpu_s({"api": 1.5, "postgres": None, "redis": 0.25}) == 1.75
