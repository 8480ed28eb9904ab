// The jobs page: search by name, status filter, a page of jobs with their schedule in words,
// next fire, last run and success rate; pages by cursor (fast however many jobs there are).
import { get, query } from "../api.js";
import { chooseNamespace, currentNamespace, inNamespace } from "../namespace.js";
import { badge, h, ms, percent, replace, table, time } from "../dom.js";
import { verdictBadge, verdicts } from "./job_health.js";

const PAGE = 25;

export async function jobsPage(main) {
  const state = { q: "", status: "", selector: "", cursors: [null] }; // cursors[i]: where page i starts
  const search = h("input", { id: "search", type: "search", placeholder: "Search by name", autocomplete: "off" });
  const status = h("select", { id: "status-filter" },
    h("option", { value: "" }, "All"), h("option", { value: "active" }, "Active"),
    h("option", { value: "paused" }, "Paused"));
  const labels = h("input", { id: "label-filter", type: "search", placeholder: "team=data,env!=prod", autocomplete: "off" });
  const space = h("select", { id: "namespace-filter" }, h("option", { value: currentNamespace() }, currentNamespace()));
  const results = h("div", { id: "jobs", "aria-live": "polite" });
  const prev = h("button", { type: "button", id: "prev" }, "← Previous");
  const next = h("button", { type: "button", id: "next" }, "Next →");
  const where = h("span", { class: "muted" });

  async function refresh() {
    const page = state.cursors.length - 1;
    const data = await get(`/api/jobs/overview${query({
      ...inNamespace(), q: state.q, status: state.status, selector: state.selector, limit: PAGE, cursor: state.cursors[page],
    })}`).catch((error) => ({ items: [], next_cursor: null, error }));
    labels.setAttribute("aria-invalid", String(Boolean(data.error)));
    if (data.error) return replace(results, h("p", { class: "error", role: "alert" }, data.error.message));
    const health = await verdicts(data.items);
    replace(results, table("Jobs", [
      ["Name", (j) => h("a", { href: `#/jobs/${j.id}` }, j.name)],
      ["Schedule", (j) => [j.description, h("br"), h("code", { class: "small" }, j.cron_expression)]],
      ["Zone", (j) => j.timezone],
      ["Status", (j) => badge(j.status)],
      ["Health", (j) => verdictBadge(health, j)],
      ["Next fire", (j) => time(j.next_run_at)],
      ["Last run", (j) => (j.last_run
        ? h("a", { href: `#/runs/${j.last_run.id}` }, badge(j.last_run.state))
        : h("span", { class: "muted" }, "none"))],
      ["Start delay", (j) => ms(j.last_run?.start_delay_ms)],
      ["Success", (j) => h("span", { title: `over the last ${j.finished} finished runs` }, percent(j.success_rate))],
    ], data.items, state.q || state.status || state.selector ? "No job matches." : "No jobs yet: create one with New job."));
    prev.disabled = page === 0;
    next.disabled = !data.next_cursor;
    next.onclick = () => { state.cursors.push(data.next_cursor); refresh(); };
    replace(where, `Page ${page + 1}`);
  }

  let typing;
  const restart = () => { state.cursors = [null]; refresh(); };
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = search.value.trim(); restart(); }, 250);
  });
  status.addEventListener("change", () => { state.status = status.value; restart(); });
  labels.addEventListener("change", () => { state.selector = labels.value.trim(); restart(); });
  space.addEventListener("change", () => { chooseNamespace(space.value); restart(); });
  prev.addEventListener("click", () => { if (state.cursors.length > 1) { state.cursors.pop(); refresh(); } });

  replace(main,
    h("div", { class: "title" }, h("h1", {}, "Jobs"), h("a", { class: "button primary", href: "#/new" }, "New job")),
    h("div", { class: "filters" },
      h("span", { class: "nowrap" }, h("label", { for: "namespace-filter" }, "Namespace "), space),
      h("label", { for: "search", class: "sr-only" }, "Search by name"), search,
      h("span", { class: "nowrap" }, h("label", { for: "status-filter" }, "Status "), status),
      h("span", { class: "nowrap" }, h("label", { for: "label-filter" }, "Labels "), labels)),
    results,
    h("div", { class: "pager" }, prev, where, next));
  get("/api/namespaces").then((data) => {
    const names = data.items.map((n) => n.name);
    if (!names.includes(currentNamespace())) names.push(currentNamespace());
    replace(space, ...names.map((n) => h("option", { value: n, selected: n === currentNamespace() }, n)));
  }).catch(() => {}); // the switcher then offers the current namespace only
  await refresh();
  return refresh;
}
