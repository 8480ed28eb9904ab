"""The console's runs and ticks tables show the API's start delay (from the tick) and its two parts,
computing none of them (issue 23, item 4): the page modules run under Node with a few lines of
DOM stand-in, no browser. Before the fix the runs table showed started_at - due_at."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

UI = Path(__file__).resolve().parents[2] / "api" / "ui"
NODE = shutil.which("node")

# Just enough of the DOM for dom.js's h() and table(): elements with children and text.
SCRIPT = """
class Node {
  constructor(tag, text = "") { this.tag = tag; this.children = []; this.text = text; this.dataset = {}; }
  setAttribute() {}
  addEventListener() {}
  append(...nodes) { this.children.push(...nodes); }
  replaceChildren() { this.children = []; }
  get textContent() { return this.text + this.children.map((c) => c.textContent).join(""); }
  all(tag) { return [...(this.tag === tag ? [this] : []), ...this.children.flatMap((c) => c.all(tag))]; }
}
globalThis.Node = Node;
globalThis.document = {
  createElement: (tag) => new Node(tag),
  createElementNS: (_, tag) => new Node(tag),
  createTextNode: (text) => new Node("#text", text),
};
const { runsTable, ticksTable } = await import("./ui/pages/job.js");
const cells = (table) => Object.fromEntries(
  table.all("th").map((th, i) => [th.textContent, table.all("td")[i].textContent]));
const run = JSON.parse(process.argv[2]);
const tick = JSON.parse(process.argv[3]);
console.log(JSON.stringify({ runs: cells(runsTable([run])), ticks: cells(ticksTable([tick])) }));
"""

# A catch-up run as GET /api/jobs/{id}/runs and GET /api/jobs/{id}/ticks show it: held back 1.2 s
# past its tick, started 0.3 s after it was due.
RUN = {
    "id": 7, "job_id": 1, "scheduled_for": "2026-01-01T00:00:00+00:00", "attempt": 1, "trigger": "schedule",
    "state": "completed", "due_at": "2026-01-01T00:00:01.200000+00:00",
    "started_at": "2026-01-01T00:00:01.500000+00:00", "duration_ms": 12.0, "node_id": "n", "error": None,
    "skip_reason": None, "start_delay_ms": 1500.0, "held_back_ms": 1200.0, "waited_ms": 300.0,
}  # fmt: skip
TICK = {
    "scheduled_for": "2026-01-01T00:00:00+00:00", "outcome": "ran", "reason": None, "revision": 1, "dst": None,
    "runs": [{"id": 7, "attempt": 1, "state": "completed", "start_delay_s": 1.5, "held_back_s": 1.2,
              "waited_s": 0.3, "skip_reason": None}],
}  # fmt: skip


@pytest.mark.skipif(NODE is None, reason="node not installed")
def test_the_runs_and_ticks_tables_show_the_apis_start_delay_and_its_parts(tmp_path: Path) -> None:
    shutil.copytree(UI, tmp_path / "ui")
    (tmp_path / "package.json").write_text('{"type": "module"}')  # the pages are ES modules
    (tmp_path / "check.mjs").write_text(SCRIPT)
    assert NODE is not None
    out = subprocess.run(
        [NODE, "check.mjs", json.dumps(RUN), json.dumps(TICK)],
        cwd=tmp_path, capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    shown = json.loads(out)
    for table in ("runs", "ticks"):
        row = shown[table]
        assert (row["Start delay"], row.get("Held back"), row.get("Waited")) == ("1.50 s", "1.20 s", "300 ms"), row
