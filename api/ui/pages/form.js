// Create or edit a job, with live checks: the schedule through the preview API as you type
// (the same check the API makes on save), the payload as JSON; the API's 422 marks its field.
// Every writable field of a job is here; an edit sends only what differs from the job as loaded
// (api/ui/edits.js), so a save that changes nothing writes nothing.
import { ApiError, get, patch, post, query } from "../api.js";
import { changedFields, parseIds, parseLabels, parseNumber } from "../edits.js";
import { flash } from "../feedback.js";
import { inNamespace } from "../namespace.js";
import { groupField } from "./groups.js";
import { flashSaved } from "./warnings.js";
import { h, local, replace, utc } from "../dom.js";
import { calendarsText, parseCalendars } from "./calendars.js";
import { chainFields } from "./form_chain.js";
import { expectationFields } from "./form_expectations.js";
import { hostsFields } from "./form_hosts.js";
import { triggersSection } from "./job_triggers.js";
import { parseSchedules, schedulesField, schedulesQuery } from "./form_schedules.js";
import { HASHED, hashKey, lintNotes, previousOf } from "./schedule_lint.js";
import { INTERVAL, INTERVAL_LABEL, intervalBody, intervalControls, intervalFields, previewInterval } from "./interval.js";

const CHOICES = {
  kind: ["task", "http", "shell"],
  schedule_type: ["cron", "run_at", INTERVAL],
  concurrency_policy: ["forbid", "allow", "replace", "buffer_one", "buffer_all"],
  misfire_policy: ["run_once", "run_all", "skip"],
  status: ["active", "paused"],
};
const LABELS = {
  schedule_type: { cron: "Repeating (cron)", run_at: "Once (run_at)", [INTERVAL]: INTERVAL_LABEL },
  concurrency_policy: {
    forbid: "forbid (skip while one runs)",
    allow: "allow (side by side)",
    replace: "replace (end the running one)",
    buffer_one: "buffer_one (one waits)",
    buffer_all: "buffer_all (every tick waits)",
  },
};
// [name, label, default on create, step, hint]; an empty optional field is null (unset).
const NUMBERS = [
  ["timeout_s", "Timeout (s)", 300, "any"],
  ["max_retries", "Max retries", 0, "1"],
  ["retry_backoff_s", "Retry backoff (s)", 10, "any", "Doubled per attempt."],
  ["misfire_grace_s", "Misfire grace (s)", 60, "any", "How late a tick may still start."],
  ["jitter_s", "Jitter (s)", 0, "any"],
];
const OPTIONAL_NUMBERS = [
  ["max_runs", "Max runs", "1", "After this many scheduled runs the job is completed.", "no limit"],
  ["catchup_max_per_s", "Catch-up pace (runs/s)", "any", "Late runs of its catch-up at most this many a second.",
    "the cluster's pace"],
];
const INSTANT_EXAMPLE = "2026-12-24T18:00:00Z";
const INSTANTS = [
  ["start_at", "Window start", `No tick before this instant (RFC 3339, e.g. ${INSTANT_EXAMPLE}).`],
  ["end_at", "Window end", "No tick after this one; then the job is completed."],
];
const PAYLOAD_HINT = {
  task: '{"action": "reindex", "target": "users"}',
  http: '{"url": "https://example.com/hook", "method": "POST"}',
  shell: '{"argv": ["echo", "hello"]}',
};

function field(name, label, control, hint) {
  return h("div", { class: "field", id: `field-${name}` },
    h("label", { for: control.id }, label), control,
    hint ? h("p", { class: "hint muted small", id: `${name}-hint` }, hint) : null,
    h("p", { class: "problem", id: `${name}-problem`, role: "alert" }));
}

function select(name, value, id = name) {
  const choices = CHOICES[name].includes(value) ? CHOICES[name] : [...CHOICES[name], value];
  return h("select", { id, name }, choices.map((v) => h("option", {
    value: v, selected: v === value, disabled: !CHOICES[name].includes(v), // e.g. a completed job's status
  }, LABELS[name]?.[v] ?? v)));
}

function text(name, value, attrs = {}) {
  return h("input", { id: name, name, spellcheck: "false", autocomplete: "off", value: value ?? "", ...attrs });
}

/** Who owns the job: `cronos apply` puts it back as its file says, console edits included. */
function managedNotice(owner) {
  return h("div", { class: "notice", id: "managed-by", role: "note" },
    h("strong", {}, `Managed by ${owner.tool}. `),
    "This job is kept in step with a jobs file by ", h("code", {}, "cronos apply"),
    ": its next apply reverts any change made here. Change the jobs file instead.");
}

export async function formPage(main, [id]) {
  const job = id ? await get(`/api/jobs/${id}`) : null;
  const value = (name, fallback) => (job ? job[name] : fallback);
  const once = job ? job.cron_expression === null && !job.every : false;
  const controls = {
    name: text("name", value("name", ""), { required: true, maxlength: 200, spellcheck: null, autocomplete: null }),
    schedule_type: select("schedule_type", job?.every ? INTERVAL : once ? "run_at" : "cron"),
    ...intervalControls(job, text),
    cron_expression: text("cron_expression", value("cron_expression", "*/5 * * * *"),
      { maxlength: 256, "aria-describedby": "preview" }),
    run_at: text("run_at", value("run_at", ""), { placeholder: INSTANT_EXAMPLE, "aria-describedby": "run_at-hint" }),
    timezone: text("timezone", value("timezone", "UTC"), { required: true, maxlength: 64 }),
    kind: select("kind", value("kind", "task")),
    payload: h("textarea", { id: "payload", name: "payload", rows: 6, spellcheck: "false" }),
    concurrency_policy: select("concurrency_policy", value("concurrency_policy", "forbid")),
    misfire_policy: select("misfire_policy", value("misfire_policy", "run_once")),
    status: select("status", value("status", "active"), "job-status"), // the page's own #status is the flash line
    queue: text("queue", value("queue", "default"), { required: true, maxlength: 64, pattern: "[A-Za-z0-9_\\-]+" }),
    concurrency_group: text("concurrency_group", value("concurrency_group", null) ?? "",
      { maxlength: 64, pattern: "[A-Za-z0-9_.\\-]+", placeholder: "none" }),
    parents: text("parents", value("parents", []).join(", "), { placeholder: "e.g. 12, 40", inputmode: "numeric" }),
    calendars: text("calendars", calendarsText(value("calendars", [])), { placeholder: "e.g. holidays, weekdays:allow" }),
    labels: text("labels", Object.entries(value("labels", {})).map(([k, v]) => `${k}=${v}`).join(", "),
      { placeholder: "e.g. team=data, env=prod" }),
    owner: text("owner", value("owner", null) ?? "", { maxlength: 253, placeholder: "none" }),
    spread: text("spread", value("spread", null) ?? "", { maxlength: 40, placeholder: "none, e.g. 10m" }),
  };
  // Secrets come back as "***"; sent back unchanged, the API keeps the stored value (and an
  // untouched payload is not sent at all).
  controls.payload.value = job ? JSON.stringify(job.payload, null, 2) : PAYLOAD_HINT.task;
  for (const [name, , fallback, step] of NUMBERS) {
    controls[name] = h("input", { id: name, name, type: "number", min: 0, step, value: value(name, fallback) });
  }
  for (const [name, , step, , unset] of OPTIONAL_NUMBERS) {
    controls[name] = h("input", { id: name, name, type: "number", min: 0, step, value: value(name, null) ?? "",
      placeholder: unset });
  }
  for (const [name] of INSTANTS) controls[name] = text(name, value(name, null), { placeholder: "none" });
  const more = schedulesField(job, field, h);
  controls.schedules = more.control;
  const expect = expectationFields(job, field);
  controls.expectations = expect.first; // where a 422 on $.expectations.* is shown
  const hosts = hostsFields(job, field);
  controls.hosts = hosts.control; // where a 422 on $.hosts.* is shown
  const chain = chainFields(job, field);
  controls.chain = chain.first; // where a 422 on $.chain.* is shown
  const preview = h("div", { id: "preview", class: "preview", "aria-live": "polite" });
  const save = h("button", { type: "submit", class: "primary", id: "save" }, job ? "Save changes" : "Create job");

  function problem(name, message) {
    const where = document.getElementById(`${name}-problem`);
    if (!where) return false;
    where.textContent = message ?? "";
    controls[name]?.setAttribute("aria-invalid", message ? "true" : "false");
    return true;
  }

  const oneOff = () => controls.schedule_type.value === "run_at";
  const interval = () => controls.schedule_type.value === INTERVAL;

  let asked = 0;
  async function checkSchedule() {
    const mine = ++asked;
    problem("schedules", null);
    const spread = controls.spread.value.trim();
    // A spread moves each fire time by the offset the name picks (docs/spread.md).
    const union = { ...schedulesQuery(controls.schedules.value), ...(spread ? { spread, job: controls.name.value } : {}) };
    problem("spread", null);
    if (interval()) {
      return previewInterval(controls, controls.timezone.value, preview, problem, () => mine === asked, union);
    }
    if (oneOff()) {
      problem("cron_expression", null);
      const at = Date.parse(controls.run_at.value);
      replace(preview, Number.isNaN(at)
        ? h("p", { class: "muted" }, `Runs once at an instant with its offset, e.g. ${INSTANT_EXAMPLE}.`)
        : h("p", { class: "lead", id: "description" }, `once, at ${utc(new Date(at).toISOString())}`));
      return;
    }
    try {
      const data = await get(`/api/schedule/preview${query({
        cron_expression: controls.cron_expression.value, timezone: controls.timezone.value, count: 5,
        ...hashKey(`${controls.cron_expression.value}\n${controls.schedules.value}`, controls.name.value),
        ...previousOf(job),
        ...union,
      })}`);
      if (mine !== asked) return;
      problem("cron_expression", null);
      problem("timezone", null);
      replace(preview, h("p", { class: "lead", id: "description" }, data.description),
        h("ol", { class: "fires" }, data.fire_times.map((t) => h("li", {}, utc(t.at), " ",
          local(t.local) ? h("span", { class: "muted" }, ` (${local(t.local)})`) : null, t.dst ? h("span", { class: "dst" }, ` ${t.dst.detail}`) : null))),
        controls.start_at.value || controls.end_at.value || controls.max_runs.value
          ? h("p", { class: "muted small" }, "The cron's own fire times: the window and max runs below keep only those within them.")
          : null,
        ...lintNotes(data));
    } catch (error) {
      if (mine !== asked) return;
      const name = error.field === "$.timezone" ? "timezone" : error.field === "$.spread" ? "spread"
        : /^(\$\.)?schedules/.test(error.field ?? "") ? "schedules" : "cron_expression";
      problem(name, error.message);
      replace(preview, h("p", { class: "muted" }, "No preview until the schedule is valid."));
    }
  }

  function checkPayload() {
    try {
      const parsed = JSON.parse(controls.payload.value);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("must be a JSON object");
      problem("payload", null);
      return parsed;
    } catch (error) {
      problem("payload", `not valid JSON: ${error.message}`);
      return undefined;
    }
  }

  const fields = {
    cron_expression: field("cron_expression", "Schedule (cron)", controls.cron_expression,
      "5 fields, 6 with seconds first, @hourly, @daily, …, or @never (runs only by hand or after its parents)"),
    run_at: field("run_at", "Run at", controls.run_at, "An instant with its offset (RFC 3339), e.g. " +
      `${INSTANT_EXAMPLE}; the job runs once then.`),
    ...intervalFields(field, controls),
  };
  function showScheduleType() {
    fields.cron_expression.hidden = oneOff() || interval();
    fields.run_at.hidden = !oneOff();
    fields.every.hidden = fields.anchor.hidden = !interval();
    more.node.hidden = oneOff(); // a one-off has no other schedules
    checkSchedule();
  }

  let typing;
  const later = () => { clearTimeout(typing); typing = setTimeout(checkSchedule, 250); };
  controls.cron_expression.addEventListener("input", later);
  controls.run_at.addEventListener("input", later);
  for (const name of ["every", "anchor"]) controls[name].addEventListener("input", later);
  controls.timezone.addEventListener("input", later);
  controls.schedules.addEventListener("input", later);
  controls.spread.addEventListener("input", later);
  controls.name.addEventListener("input", () => {
    if (controls.spread.value.trim() || HASHED.test(`${controls.cron_expression.value}\n${controls.schedules.value}`)) later();
  });
  for (const name of ["start_at", "end_at", "max_runs"]) controls[name].addEventListener("input", later); // the note
  controls.schedule_type.addEventListener("change", showScheduleType);
  controls.payload.addEventListener("input", checkPayload);
  controls.kind.addEventListener("change", () => {
    if (!job) controls.payload.value = PAYLOAD_HINT[controls.kind.value];
    checkPayload();
  });

  const open = job ? true : undefined; // editing: every field of the job in sight
  const form = h("form", { id: "job-form", novalidate: true },
    job?.managed_by ? managedNotice(job.managed_by) : null,
    h("div", { class: "form-grid" },
      field("name", "Name", controls.name),
      field("kind", "Kind", controls.kind),
      field("status", "Status", controls.status),
      field("schedule_type", "Runs", controls.schedule_type),
      fields.cron_expression,
      fields.run_at,
      fields.every,
      fields.anchor,
      field("timezone", "Time zone (IANA)", controls.timezone),
      more.node),
    h("section", { class: "preview-box", "aria-label": "Schedule preview" }, preview),
    field("payload", "Payload (JSON)", controls.payload, "Secrets show as *** and are kept when sent back unchanged."),
    h("details", { id: "policies", open }, h("summary", {}, "Policies"),
      h("div", { class: "form-grid" },
        NUMBERS.map(([name, label, , , hint]) => field(name, label, controls[name], hint)),
        field("spread", "Spread", controls.spread,
          "Every tick moved by an offset the name picks in [0, spread), e.g. 10m: stable, unlike the jitter."),
        field("concurrency_policy", "Overlap (concurrency)", controls.concurrency_policy),
        field("misfire_policy", "Misfire", controls.misfire_policy),
        field("queue", "Queue", controls.queue, "Executors started with --queue NAME run it."),
        groupField(controls.concurrency_group))),
    h("details", { id: "window", open }, h("summary", {}, "Window, limits and parents"),
      h("div", { class: "form-grid" },
        INSTANTS.map(([name, label, hint]) => field(name, label, controls[name], hint)),
        OPTIONAL_NUMBERS.map(([name, label, , hint]) => field(name, label, controls[name], hint)),
        field("parents", "Parents (job ids)", controls.parents,
          "It also runs after each successful run of each of these jobs (otherwise: After its parents, below)."),
        field("calendars", "Calendars", controls.calendars,
          "Skips its ticks on a calendar's days (NAME) or on every other day (NAME:allow); see Calendars."))),
    h("details", { id: "labels-box", open }, h("summary", {}, "Labels and owner"),
      h("div", { class: "form-grid" },
        field("labels", "Labels", controls.labels, "key=value, separated by commas: found by selector (team=data)."),
        field("owner", "Owner", controls.owner))),
    chain.node,
    expect.node,
    hosts.node,
    h("p", { class: "problem", id: "form-problem", role: "alert" }),
    h("div", { class: "actions" }, save, h("a", { class: "button", href: job ? `#/jobs/${id}` : "#/jobs" }, "Cancel")));

  /** Every field as the API takes it; undefined (with the field marked) when one cannot be read. */
  function values() {
    const payload = checkPayload(); // as loaded when untouched: then equal to job.payload, not sent
    if (payload === undefined) return controls.payload.focus();
    const parents = parseIds(controls.parents.value);
    if (parents === undefined) {
      problem("parents", "job ids (whole numbers from 1), separated by commas");
      controls.parents.closest("details").open = true;
      return controls.parents.focus();
    }
    if (oneOff() && !controls.run_at.value.trim()) {
      problem("run_at", "a one-off needs the instant it runs at");
      return controls.run_at.focus();
    }
    const calendars = parseCalendars(controls.calendars.value);
    if (calendars === undefined) {
      problem("calendars", "calendar names, each NAME or NAME:allow, separated by commas");
      controls.calendars.closest("details").open = true;
      return controls.calendars.focus();
    }
    const labels = parseLabels(controls.labels.value);
    if (labels === undefined) {
      problem("labels", "key=value pairs, separated by commas");
      return controls.labels.focus();
    }
    const schedules = oneOff() ? [] : parseSchedules(controls.schedules.value);
    if (schedules === undefined) {
      problem("schedules", "each line a cron expression, TZ=Zone and one, or every DURATION");
      return controls.schedules.focus();
    }
    const chained = chain.value(problem);
    if (chained === undefined) return undefined;
    const body = { payload, parents, calendars, labels, schedules, owner: controls.owner.value.trim() || null, chain: chained };
    for (const name of ["name", "timezone", "kind", "status", "concurrency_policy", "misfire_policy", "queue"]) {
      body[name] = controls[name].value;
    }
    body.concurrency_group = controls.concurrency_group.value.trim() || null;
    body.cron_expression = oneOff() || interval() ? null : controls.cron_expression.value;
    intervalBody(body, interval(), controls);
    body.run_at = oneOff() ? controls.run_at.value.trim() || null : null;
    for (const [name] of [...NUMBERS, ...OPTIONAL_NUMBERS]) body[name] = parseNumber(controls[name].value);
    for (const [name] of INSTANTS) body[name] = controls[name].value.trim() || null;
    body.expectations = expect.value();
    body.hosts = hosts.value();
    body.spread = oneOff() ? null : controls.spread.value.trim() || null;
    return body;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const name of Object.keys(controls)) problem(name, null);
    problem("form", null);
    const body = values();
    if (body === undefined) return;
    const changes = job ? changedFields(job, body) : body;
    if (job && !Object.keys(changes).length) {
      flash("Nothing changed");
      location.hash = `#/jobs/${id}`;
      return;
    }
    save.disabled = true;
    try {
      const saved = job ? await patch(`/api/jobs/${id}`, changes) : await post(`/api/jobs${query(inNamespace())}`, body);
      flashSaved(job ? `Saved: ${Object.keys(changes).sort().join(", ")}` : "Created", saved.warnings);
      location.hash = `#/jobs/${saved.id}`;
    } catch (error) {
      let name = error instanceof ApiError && error.field ? error.field.replace(/^\$\./, "").split(/[.[]/)[0] : "form";
      if (name in fields && fields[name].hidden) name = oneOff() ? "run_at" : interval() ? "every" : "cron_expression";
      if (!problem(name, error.message)) problem("form", error.message);
      controls[name]?.closest("details")?.setAttribute("open", ""); // a policy field: show it
      (controls[name] ?? save).focus();
    } finally {
      save.disabled = false;
    }
  });

  // A job's trigger URLs: their own calls, apart from the form's Save (pages/job_triggers.js).
  const triggers = job ? triggersSection(id) : null;
  replace(main, h("h1", {}, job ? `Edit ${job.name}` : "New job"), form, triggers?.node);
  await triggers?.refresh();
  showScheduleType();
  controls.name.focus();
  return null;
}
