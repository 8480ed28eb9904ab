// The console's router: #/jobs, #/jobs/ID, #/jobs/ID/edit, #/new, #/runs, #/runs/ID, #/cluster, #/channels,
// #/fleet, #/calendars.
// Each page renders once, then its refresh() is polled while it is shown and the tab visible.
import { h, replace } from "./dom.js";
import { flash, showError } from "./feedback.js";
import { calendarsPage } from "./pages/calendars.js";
import { channelsPage } from "./pages/channels.js";
import { clusterPage } from "./pages/cluster.js";
import { fleetPage } from "./pages/fleet.js";
import { formPage } from "./pages/form.js";
import { groupsPage } from "./pages/groups.js";
import { jobPage } from "./pages/job.js";
import { jobsPage } from "./pages/jobs.js";
import { runPage } from "./pages/run.js";
import { runsPage } from "./pages/runs.js";
import { showFailures } from "./failures.js";
import { showAccount } from "./account.js";

const ROUTES = [
  [/^#\/jobs\/?$/, jobsPage, "jobs"],
  [/^#\/jobs\/(\d+)\/?$/, jobPage, "jobs"],
  [/^#\/jobs\/(\d+)\/edit$/, formPage, "jobs"],
  [/^#\/new$/, formPage, "new"],
  [/^#\/runs\/(\d+)\/?$/, runPage, "jobs"],
  [/^#\/runs\/?(?:\?(.*))?$/, runsPage, "runs"],
  [/^#\/cluster\/?$/, clusterPage, "cluster"],
  [/^#\/channels\/?$/, channelsPage, "channels"],
  [/^#\/fleet\/?$/, fleetPage, "fleet"],
  [/^#\/calendars\/?$/, calendarsPage, "calendars"],
  [/^#\/groups(?:\/([^/?]+))?\/?$/, groupsPage, "groups"],
];
const POLL_MS = 3000;

let current = { generation: 0, refresh: null };

async function route() {
  const hash = location.hash || "#/jobs";
  const generation = ++current.generation;
  current.refresh = null;
  const main = document.getElementById("main");
  const found = ROUTES.find(([pattern]) => pattern.test(hash));
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (found && link.dataset.nav === found[2]) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (!found) {
    replace(main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/jobs" }, "Back to the jobs")));
    return;
  }
  const [pattern, page] = found;
  const params = hash.match(pattern).slice(1);
  replace(main, h("p", { class: "muted" }, "Loading…"));
  try {
    const refresh = await page(main, params, () => generation === current.generation);
    if (generation === current.generation) current.refresh = refresh ?? null;
  } catch (error) {
    if (generation === current.generation) showError(main, error);
  }
  if (generation === current.generation && !main.contains(document.activeElement)) main.focus({ preventScroll: true });
}

let polling = false;
setInterval(async () => {
  const refresh = current.refresh;
  if (!refresh || polling || document.hidden) return;
  polling = true;
  try {
    await refresh();
  } catch (error) {
    flash(`Update failed: ${error.message}`);
  } finally {
    polling = false;
  }
}, POLL_MS);

// A new width (a phone turned, a window resized) redraws the page's data at once (the chart's width).
let resizing;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => current.refresh?.().catch(() => {}), 150);
});
window.addEventListener("hashchange", route);
if (!location.hash) history.replaceState(null, "", "#/jobs");
route();
showFailures();
showAccount();
