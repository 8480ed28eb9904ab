// The header's failures count: failed runs whose tick is in the last 24 h, a link to the Runs page
// filtered so. One page of the API's failed-runs index a minute (at most COUNTED runs read); it
// never asks for a token (a console without one shows nothing here until the first page has one).
import { token } from "./api.js";
import { replace } from "./dom.js";

const COUNTED = 100;
const EVERY_MS = 60_000;

async function count(link) {
  const from = new Date(Date.now() - 86_400_000).toISOString();
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const response = await fetch(`/api/runs?state=failed&from=${encodeURIComponent(from)}&limit=${COUNTED}`,
    { headers, credentials: "omit", cache: "no-store" });
  if (!response.ok) {
    link.hidden = true;
    return;
  }
  const page = await response.json();
  const n = page.next_cursor ? `${page.items.length}+` : String(page.items.length);
  replace(link, `Failed (24 h): ${n}`);
  link.classList.toggle("alarm", page.items.length > 0);
  link.hidden = false;
}

export function showFailures() {
  const link = document.getElementById("failures");
  if (!link) return;
  const update = () => count(link).catch(() => { link.hidden = true; });
  update();
  setInterval(() => { if (!document.hidden) update(); }, EVERY_MS);
  window.addEventListener("hashchange", update); // after a retry, a filter change: fresh at once
}
