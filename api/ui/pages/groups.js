// Concurrency groups (#/groups, #/groups/NAME): each group's limit, the runs holding its slots and
// the runs waiting for one (in the order they get it); a limit is set here too. The job form's
// group field and the run view's "waiting for" line come from this module.
import { inNamespace } from "../namespace.js";
import { ApiError, api, get, query } from "../api.js";
import { fields, h, relative, replace, table, utc } from "../dom.js";
import { flash } from "../feedback.js";

const path = (name) => `/api/concurrency-groups/${encodeURIComponent(name)}`;
const groupLink = (name) => h("a", { href: `#/groups/${encodeURIComponent(name)}` }, name);
const runLink = (r) => h("a", { href: `#/runs/${r.run_id}` }, `#${r.run_id}`);
const jobLink = (r) => h("a", { href: `#/jobs/${r.job_id}` }, r.job_name);

/** The job form's field: a group name (empty: none), the existing groups offered. */
export function groupField(control) {
  const list = h("datalist", { id: "concurrency-groups" });
  control.setAttribute("list", list.id);
  get(`/api/concurrency-groups${query(inNamespace())}`)
    .then((groups) => replace(list, groups.items.map((g) => h("option", { value: g.name }, `limit ${g.limit}`))))
    .catch(() => {}); // only suggestions: the API judges the name on save
  return h("div", { class: "field", id: "field-concurrency_group" },
    h("label", { for: control.id }, "Concurrency group"), control, list,
    h("p", { class: "hint muted small", id: "concurrency_group-hint" },
      "Its runs start only with a free slot of this group, shared with every job naming it (",
      h("a", { href: "#/groups" }, "groups"), "). Empty: none."),
    h("p", { class: "problem", id: "concurrency_group-problem", role: "alert" }));
}

/** The run view's line for a run that waits (or waited) for a group. */
export function groupRow(run) {
  if (!run.waiting_for) return [];
  return [[run.state === "waiting" ? "Waiting for group" : "Waited for group", groupLink(run.waiting_for)]];
}

function limitForm(name, limit, after) {
  const input = h("input", { id: "group-limit", name: "limit", type: "number", min: 1, max: 100000, step: 1,
    required: true, value: limit ?? "" });
  const named = name === null ? h("input", { id: "group-name", name: "name", required: true, maxlength: 64,
    pattern: "[A-Za-z0-9_.\\-]+", placeholder: "warehouse", spellcheck: "false" }) : null;
  const problem = h("p", { class: "problem", id: "group-problem", role: "alert" });
  const form = h("form", { class: "inline-form", id: "group-form" },
    named ? [h("label", { for: "group-name" }, "Group"), named] : null,
    h("label", { for: "group-limit" }, "Limit"), input,
    h("button", { type: "submit" }, name === null ? "Create" : "Set limit"), problem);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const target = name ?? named.value.trim();
    problem.textContent = "";
    try {
      const group = await api("PUT", `${path(target)}${query(inNamespace())}`, { limit: Number(input.value) });
      flash(`Group ${group.name}: limit ${group.limit}.`);
      await after(group);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      problem.textContent = error.message;
    }
  });
  return form;
}

/** The poll does not redraw a form being filled in; a save redraws at once (force). */
const typing = (main) => main.contains(document.activeElement) && document.activeElement.closest("form") !== null;

async function listPage(main, alive) {
  async function refresh(force = false) {
    const groups = await get(`/api/concurrency-groups${query(inNamespace())}`);
    if (!alive() || !force && typing(main)) return;
    replace(main,
      h("h1", {}, "Concurrency groups"),
      h("p", { class: "muted" }, "Jobs naming a group share its slots: at most its limit of their runs run at once; ",
        "the others wait, and start in tick order as slots free up."),
      table("Concurrency groups", [
        ["Group", (g) => groupLink(g.name)],
        ["Limit", (g) => String(g.limit)],
        ["Holding", (g) => String(g.holding)],
        ["Waiting", (g) => String(g.waiting)],
        ["Jobs", (g) => String(g.jobs)],
      ], groups.items, "No group yet: create one below, then name it in a job's form."),
      h("h2", {}, "Create a group or set its limit"),
      limitForm(null, 2, (g) => { location.hash = `#/groups/${encodeURIComponent(g.name)}`; }));
  }
  await refresh(true);
  return () => refresh();
}

async function groupPage(main, name, alive) {
  async function refresh(force = false) {
    const g = await get(path(name));
    if (!alive() || !force && typing(main)) return;
    replace(main,
      h("p", {}, h("a", { href: "#/groups" }, "← Groups")),
      h("h1", {}, `Group ${g.name}`),
      fields([
        ["Limit", h("strong", { id: "group-limit-value" }, String(g.limit))],
        ["Holding a slot", String(g.holding)],
        ["Waiting", String(g.waiting)],
        ["Jobs", g.members.length ? g.members.map((j, i) => [i ? ", " : "", jobLink({ job_id: j.id, job_name: j.name })])
          : "none"],
      ]),
      limitForm(name, g.limit, () => refresh(true)),
      h("h2", {}, "Holding a slot"),
      table("Runs holding a slot", [
        ["Run", runLink], ["Job", jobLink], ["Tick", (r) => utc(r.scheduled_for)], ["State", (r) => r.state],
        ["Node", (r) => r.node_id ?? "–"], ["Started", (r) => (r.started_at ? relative(r.started_at) : "starting")],
      ], g.holders, "No run holds a slot."),
      h("h2", {}, "Waiting, in the order they get a slot"),
      table("Runs waiting for a slot", [
        ["#", (r) => String(g.waiters.indexOf(r) + 1)], ["Run", runLink], ["Job", jobLink],
        ["Tick", (r) => utc(r.scheduled_for)], ["Due", (r) => relative(r.due_at)],
      ], g.waiters, "No run waits."));
  }
  await refresh(true);
  return () => refresh();
}

export async function groupsPage(main, [name], alive) {
  return name === undefined ? listPage(main, alive) : groupPage(main, decodeURIComponent(name), alive);
}
