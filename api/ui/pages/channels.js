// Notification channels: each with what it applies to, its events and rules, a test button, and
// the latest deliveries of every channel with their state (sent, pending with its next try,
// failed with the last error, suppressed with the rule's reason). Adding a webhook or Slack
// channel here; email channels come from the CLI or the API (their SMTP settings are many).
import { inNamespace } from "../namespace.js";
import { ApiError, del, get, post, query } from "../api.js";
import { badge, h, replace, table, time } from "../dom.js";
import { flash } from "../feedback.js";
import { jobLink, loadJobNames } from "../job_names.js";

const DELIVERIES = 10; // per channel
const EVENTS = ["failed", "recovered", "missed", "late_start", "overran", "too_fast", "no_success", "skipped",
  "cancelled", "paused_by_breaker", "canary_by_breaker", "resumed_by_breaker"];

function target(c) {
  if (c.kind === "email" && c.smtp) return `${c.smtp.to.join(", ")} via ${c.smtp.host}`;
  return c.url ?? "–";
}

function scope(c) {
  const parts = [];
  if (c.jobs) parts.push(h("span", {}, c.jobs.length === 1 ? "job " : "jobs ", c.jobs.map((id, i) => [i ? ", " : "", jobLink(id)])));
  if (c.queues) parts.push(`queues ${c.queues.join(", ")}`);
  if (c.selector) parts.push(h("span", {}, "labels ", h("code", {}, c.selector)));
  return parts.length ? parts : "every job";
}

function rules(c) {
  const out = [];
  if (c.after_failures > 1) out.push(`after ${c.after_failures} failures in a row`);
  if (c.rate_limit_s) out.push(`at most 1 per job per ${c.rate_limit_s} s`);
  if (c.quiet_hours) {
    const q = c.quiet_hours;
    out.push(`quiet ${q.start}–${q.end} ${q.timezone} (${q.hold ? "held" : "dropped"})`);
  }
  if (!c.enabled) out.push("disabled");
  return out.join("; ") || "–";
}

const csv = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);

function createForm(done) {
  const field = (id, label, input) => h("div", { class: "field" }, h("label", { for: id }, label), input);
  const name = h("input", { id: "ch-name", required: true, autocomplete: "off" });
  const kind = h("select", { id: "ch-kind" }, h("option", { value: "webhook" }, "Webhook (signed JSON)"),
    h("option", { value: "slack" }, "Slack incoming webhook"));
  const url = h("input", { id: "ch-url", type: "url", required: true, placeholder: "https://…" });
  const events = h("input", { id: "ch-events", value: "failed,recovered,missed", title: EVENTS.join(", ") });
  const jobs = h("input", { id: "ch-jobs", placeholder: "every job", inputmode: "numeric" });
  const queues = h("input", { id: "ch-queues", placeholder: "every queue" });
  const selector = h("input", { id: "ch-selector", placeholder: "team=data,env!=dev", autocomplete: "off" });
  const after = h("input", { id: "ch-after", type: "number", min: 1, value: 1 });
  const rate = h("input", { id: "ch-rate", type: "number", min: 0, value: 0 });
  const secret = h("p", { id: "ch-secret", "aria-live": "polite" });
  const form = h("form", { id: "channel-form" },
    h("div", { class: "form-grid" },
      field("ch-name", "Name", name), field("ch-kind", "Kind", kind), field("ch-url", "URL", url),
      field("ch-events", "Events (comma-separated)", events), field("ch-jobs", "Job ids (comma-separated)", jobs),
      field("ch-queues", "Queues (comma-separated)", queues), field("ch-selector", "Labels (selector)", selector),
      field("ch-after", "After N failures", after),
      field("ch-rate", "Rate limit (s)", rate)),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Add channel")), secret);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), kind: kind.value, url: url.value.trim(), events: csv(events.value),
      after_failures: Number(after.value), rate_limit_s: Number(rate.value) };
    if (csv(jobs.value).length) body.jobs = csv(jobs.value).map(Number);
    if (csv(queues.value).length) body.queues = csv(queues.value);
    if (selector.value.trim()) body.selector = selector.value.trim();
    try {
      const created = await post(`/api/channels${query(inNamespace())}`, body);
      flash(`Channel ${created.name} added`);
      replace(secret, created.webhook_secret
        ? ["Signing secret (shown this once): ", h("code", {}, created.webhook_secret)] : "");
      form.reset();
      await done();
    } catch (error) {
      flash(error instanceof ApiError ? error.message : String(error));
    }
  });
  return form;
}

export async function channelsPage(main, _params, alive) {
  const list = h("div", { id: "channels" });
  const recent = h("div", { id: "deliveries" });

  async function act(label, call) {
    try {
      await call();
      flash(label);
      await refresh();
    } catch (error) {
      flash(error instanceof ApiError ? error.message : String(error));
    }
  }

  async function refresh() {
    const channels = (await get(`/api/channels${query(inNamespace())}`)).items;
    const pages = await Promise.all(channels.map((c) => get(`/api/channels/${c.id}/deliveries?limit=${DELIVERIES}`)));
    if (!alive()) return;
    const names = Object.fromEntries(channels.map((c) => [c.id, c.name]));
    const deliveries = pages.flatMap((p) => p.items).sort((a, b) => b.id - a.id);
    await loadJobNames([...channels.flatMap((c) => c.jobs ?? []), ...deliveries.map((d) => d.job_id).filter(Boolean)]);
    if (!alive()) return;
    replace(list, table("Channels", [
      ["Name", (c) => h("strong", {}, c.name)],
      ["Kind", (c) => c.kind],
      ["Target", (c) => h("code", { class: "small" }, target(c))],
      ["Applies to", scope],
      ["Events", (c) => c.events.join(", ")],
      ["Rules", rules],
      ["", (c) => [
        h("button", { type: "button", class: "test", onclick: () => act(`Test queued on ${c.name}`,
          () => post(`/api/channels/${c.id}/test`)) }, "Send test"), " ",
        h("button", { type: "button", class: "danger", onclick: () => {
          if (confirm(`Delete channel "${c.name}" and its deliveries?`)) act("Deleted", () => del(`/api/channels/${c.id}`));
        } }, "Delete")]],
    ], channels, ["No channel yet: add one below, or with ", h("code", {}, "cronos channels add"), "."]));
    replace(recent, table("Recent deliveries", [
      ["Channel", (d) => names[d.channel_id]],
      ["Event", (d) => d.kind],
      ["Job", (d) => (d.job_id ? jobLink(d.job_id) : "–")],
      ["State", (d) => badge(d.state)],
      ["Attempts", (d) => String(d.attempts)],
      ["When", (d) => time(d.sent_at ?? d.created_at)],
      ["Next try", (d) => (d.state === "pending" ? time(d.due_at) : "–")],
      ["Error or reason", (d) => d.last_error ?? d.reason ?? ""],
    ], deliveries, "No notification yet."));
  }

  replace(main,
    h("h1", {}, "Channels"),
    h("p", { class: "muted" }, "Where Cronos tells you about jobs that fail, recover, miss a tick or run late."),
    list,
    h("h2", {}, "Recent deliveries"), recent,
    h("h2", {}, "Add a channel"), createForm(refresh));
  await refresh();
  return refresh;
}
