// The cluster page's work sections: each queue's stream (length, lag, pending, consumers), each
// executor with the queues it reads, the task actions it runs and its share of the runs (runs it
// started in the last 5 minutes, % of all executors', its last claim: an idle healthy executor has a
// fresh heartbeat and an old claim), and the actions no live executor of their queue serves (their
// runs wait queued: executor.routing).
import { h, table } from "../dom.js";

const list = (items) => (items?.length ? items.join(", ") : "–");
const minutes = (s) => (s >= 60 ? `${Math.round(s / 60)} min` : `${Math.round(s)} s`);
const ago = (s) => (s >= 120 ? `${Math.round(s / 60)} min` : `${s.toFixed(1)} s`);

export function workSections(c) {
  const queues = Object.entries(c.queues ?? {}).map(([name, q]) => ({ name, ...q }));
  const executors = (c.nodes ?? []).filter((n) => n.role === "executor");
  return [
    ...(c.unserved?.length ? [h("div", { class: "notice", id: "unserved", role: "alert" },
      c.unserved.map((u) => h("p", {}, `${u.message} (reported by ${u.reported_by.join(", ")})`)))] : []),
    h("h2", {}, "Queues"),
    table("Queues", [
      ["Queue", (q) => h("strong", {}, q.name)],
      ["Lag", (q) => String(q.lag ?? "–")],
      ["Pending", (q) => String(q.pending)],
      ["Length", (q) => String(q.length)],
      ["Consumers", (q) => Object.entries(q.consumers).map(([node, held]) => `${node} (${held} pending)`).join(", ") || "none"],
    ], queues, "No queue has had a run yet."),
    h("h2", {}, "Executors"),
    table("Executors", [
      ["Executor", (n) => n.node_id],
      ["Queues", (n) => list(n.queues)],
      ["Actions", (n) => (n.actions === null ? "any (older release)" : list(n.actions))],
      ["Shell", (n) => (n.shell === null ? "–" : n.shell ? "allowed" : "off")],
      ["In flight", (n) => `${n.info.in_flight ?? "–"} / ${n.info.concurrency ?? "–"}`],
      ["Runs started", (n) => (n.runs ? `${n.runs.started} in ${minutes(n.runs.window_s)}` : "–")],
      ["Share", (n) => ((n.runs?.share_pct ?? null) === null ? "–" : `${n.runs.share_pct.toFixed(1)} %`)],
      ["Last claimed", (n) => (!n.runs ? "–" : n.runs.last_claimed_age_s === null ? "never" : `${ago(n.runs.last_claimed_age_s)} ago`)],
    ], executors, "No executor has reported in."),
  ];
}
