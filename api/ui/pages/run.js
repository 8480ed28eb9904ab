// A run: its state and timing, what its work used, error and traceback, result excerpt, and the attempt chain of its tick.
import { get } from "../api.js";
import { badge, fields, h, ms, replace, utc } from "../dom.js";
import { runsTable, startDelay } from "./job.js";
import { groupRow } from "./groups.js";
import { cancelButton } from "./run_cancel.js";
import { retryButton } from "./run_retry.js";
import { runOutput } from "./run_output.js";
import { usageSection } from "./run_usage.js";

export async function runPage(main, [id], alive) {
  const output = runOutput(id, alive); // kept across refreshes: its lines grow as they come
  async function refresh() {
    const run = await get(`/api/runs/${id}`);
    // The attempts of one tick share (job, scheduled_for); they are among the job's newest runs.
    const recent = await get(`/api/jobs/${run.job_id}/runs?limit=500`).catch(() => ({ items: [] }));
    if (!alive()) return;
    const chain = recent.items.filter((r) => r.scheduled_for === run.scheduled_for).sort((a, b) => a.attempt - b.attempt);
    replace(main,
      h("p", {}, h("a", { href: `#/jobs/${run.job_id}` }, "← Job ", String(run.job_id))),
      h("div", { class: "title" }, h("h1", {}, `Run #${run.id}`), badge(run.state), cancelButton(run, refresh)),
      retryButton(run),
      fields([
        ["Tick", utc(run.scheduled_for)],
        ["Attempt", `${run.attempt} (${run.trigger})`],
        ["Due", utc(run.due_at)],
        ["Started", utc(run.started_at)],
        ["Finished", utc(run.finished_at)],
        ["Start delay", ms(startDelay(run))],
        ["Held back", ms(run.held_back_ms)],
        ["Waited", ms(run.waited_ms)],
        ["Duration", ms(run.duration_ms)],
        ["Node", run.node_id ?? "–"],
        ["Epoch", run.epoch ?? "–"],
        ["Skip reason", run.skip_reason ?? "–"],
        ...groupRow(run),
      ]),
      usageSection(run),
      run.inputs ? h("section", { "aria-labelledby": "inputs-h" }, h("h2", { id: "inputs-h" }, "Inputs (overrides of this run)"),
        h("pre", { class: "payload", id: "inputs", tabindex: "0" }, JSON.stringify(run.inputs, null, 2))) : null,
      run.error ? h("section", { "aria-labelledby": "err-h" }, h("h2", { id: "err-h" }, "Error"),
        h("p", { class: "error" }, run.error)) : null,
      run.traceback ? h("section", { "aria-labelledby": "tb-h" }, h("h2", { id: "tb-h" }, "Traceback"),
        h("pre", { class: "traceback", id: "traceback", tabindex: "0" }, run.traceback)) : null,
      run.result ? h("section", { "aria-labelledby": "res-h" }, h("h2", { id: "res-h" }, "Result (excerpt)"),
        h("pre", { class: "payload", tabindex: "0" }, run.result)) : null,
      output.section,
      h("section", { "aria-labelledby": "chain-h" }, h("h2", { id: "chain-h" }, "Attempts of this tick"),
        runsTable(chain.length ? chain : [run])));
    await output.update(run);
    return run;
  }
  const run = await refresh();
  return ["queued", "waiting", "reserved", "running"].includes(run.state) ? refresh : null;
}
