// Job names for pages that hold only job ids (runs, channels, deliveries): each id read once
// per page load (GET /api/jobs/ID), shown as a link with the job's name.
import { get } from "./api.js";
import { h } from "./dom.js";

const names = new Map(); // job id -> name (or a promise of it)

/** Reads the names of these job ids not read yet; a job that cannot be read shows as `job ID`. */
export async function loadJobNames(ids) {
  for (const id of new Set(ids)) {
    if (!names.has(id)) names.set(id, get(`/api/jobs/${id}`).then((j) => j.name, () => `job ${id}`));
  }
  const entries = await Promise.all([...names].map(async ([id, name]) => [id, await name]));
  for (const [id, name] of entries) names.set(id, name);
}

export const jobName = (id) => names.get(id) ?? `job ${id}`;

export const jobLink = (id) => h("a", { href: `#/jobs/${id}` }, jobName(id));
