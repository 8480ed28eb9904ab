// The cluster page's work sections: each queue's stream (length, lag, pending, consumers), each
// executor with the queues it reads and the task actions it runs, and the actions no live
// executor of their queue serves (their runs wait queued: executor.routing).
import { h, table } from "../dom.js";

const list = (items) => (items?.length ? items.join(", ") : "–");

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
      ["In flight", (n) => `${n.info.in_flight ?? "–"} / ${n.info.concurrency ?? "–"}`],
    ], executors, "No executor has reported in."),
  ];
}
