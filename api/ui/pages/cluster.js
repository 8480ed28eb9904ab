// The cluster: leader and epoch, every node with its role and heartbeat age, the run stream; its
// queues and executors (cluster_work.js).
import { get } from "../api.js";
import { fields, h, replace, table } from "../dom.js";
import { workSections } from "./cluster_work.js";

export async function clusterPage(main, _params, alive) {
  async function refresh() {
    const c = await get("/api/cluster");
    if (!alive()) return;
    const health = c.leader_health;
    replace(main,
      h("h1", {}, "Cluster"),
      fields([
        ["Leader", h("strong", { id: "leader" }, c.leader.node_id ?? "none")],
        ["Epoch", String(c.leader.epoch ?? "–")],
        ["Leader health", health ? (health.healthy ? "healthy" : "not healthy") +
          (health.db_ok_age_s === null ? "" : ` (PostgreSQL ${health.db_ok_age_s.toFixed(1)} s ago)`) : "–"],
        ["PostgreSQL", c.database],
        ["Redis", c.cache],
        ["Stream length", String(c.stream?.length ?? "–")],
        ["Pending", String(c.stream?.pending ?? "–")],
        ["Lag", String(c.stream?.lag ?? "–")],
      ]),
      ...workSections(c),
      h("h2", {}, "Nodes"),
      table("Nodes", [
        ["Node", (n) => [n.node_id, n.node_id === c.leader.node_id && n.role === "dispatcher" ? " (leader)" : ""]],
        ["Role", (n) => n.role],
        ["Heartbeat", (n) => (n.age_s === null ? "–" : `${n.age_s.toFixed(1)} s ago`)],
      ], c.nodes, "No node has reported in."));
  }
  await refresh();
  return refresh;
}
