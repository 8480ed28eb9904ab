// Create or edit a job, with live checks: the schedule through the preview API as you type
// (the same check the API makes on save), the payload as JSON; the API's 422 marks its field.
import { ApiError, get, patch, post, query } from "../api.js";
import { flash } from "../feedback.js";
import { h, local, replace, utc } from "../dom.js";

const CHOICES = {
  kind: ["task", "http", "shell"],
  concurrency_policy: ["forbid", "allow", "replace"],
  misfire_policy: ["run_once", "run_all", "skip"],
  status: ["active", "paused"],
};
const NUMBERS = [
  ["timeout_s", "Timeout (s)", 300, "any"],
  ["max_retries", "Max retries", 0, "1"],
  ["retry_backoff_s", "Retry backoff (s)", 10, "any"],
  ["misfire_grace_s", "Misfire grace (s)", 60, "any"],
  ["jitter_s", "Jitter (s)", 0, "any"],
];
const PAYLOAD_HINT = {
  task: '{"action": "reindex", "target": "users"}',
  http: '{"url": "https://example.com/hook", "method": "POST"}',
  shell: '{"argv": ["echo", "hello"]}',
};

function field(name, label, control, hint) {
  return h("div", { class: "field", id: `field-${name}` },
    h("label", { for: name }, label), control,
    hint ? h("p", { class: "hint muted small", id: `${name}-hint` }, hint) : null,
    h("p", { class: "problem", id: `${name}-problem`, role: "alert" }));
}

function select(name, value) {
  return h("select", { id: name, name }, CHOICES[name].map((v) => h("option", { value: v, selected: v === value }, v)));
}

export async function formPage(main, [id]) {
  const job = id ? await get(`/api/jobs/${id}`) : null;
  const value = (name, fallback) => (job ? job[name] : fallback);
  const controls = {
    name: h("input", { id: "name", name: "name", required: true, maxlength: 200, value: value("name", "") }),
    cron_expression: h("input", { id: "cron_expression", name: "cron_expression", required: true, maxlength: 256,
      spellcheck: "false", autocomplete: "off", value: value("cron_expression", "*/5 * * * *"),
      "aria-describedby": "preview" }),
    timezone: h("input", { id: "timezone", name: "timezone", required: true, maxlength: 64, spellcheck: "false",
      value: value("timezone", "UTC") }),
    kind: select("kind", value("kind", "task")),
    payload: h("textarea", { id: "payload", name: "payload", rows: 6, spellcheck: "false" }),
    concurrency_policy: select("concurrency_policy", value("concurrency_policy", "forbid")),
    misfire_policy: select("misfire_policy", value("misfire_policy", "run_once")),
    status: select("status", value("status", "active")),
    queue: h("input", { id: "queue", name: "queue", required: true, maxlength: 64, spellcheck: "false",
      pattern: "[A-Za-z0-9_\\-]+", value: value("queue", "default") }),
  };
  // Secrets come back as "***"; sent back unchanged, the API keeps the stored value.
  controls.payload.value = job ? JSON.stringify(job.payload, null, 2) : PAYLOAD_HINT.task;
  for (const [name, , fallback, step] of NUMBERS) {
    controls[name] = h("input", { id: name, name, type: "number", min: 0, step, value: value(name, fallback) });
  }
  const preview = h("div", { id: "preview", class: "preview", "aria-live": "polite" });
  const save = h("button", { type: "submit", class: "primary", id: "save" }, job ? "Save changes" : "Create job");

  function problem(name, text) {
    const where = document.getElementById(`${name}-problem`);
    if (!where) return false;
    where.textContent = text ?? "";
    controls[name]?.setAttribute("aria-invalid", text ? "true" : "false");
    return true;
  }

  let asked = 0;
  async function checkSchedule() {
    const mine = ++asked;
    try {
      const data = await get(`/api/schedule/preview${query({
        cron_expression: controls.cron_expression.value, timezone: controls.timezone.value, count: 5,
      })}`);
      if (mine !== asked) return;
      problem("cron_expression", null);
      problem("timezone", null);
      replace(preview, h("p", { class: "lead", id: "description" }, data.description),
        h("ol", { class: "fires" }, data.fire_times.map((t) => h("li", {}, utc(t.at), " ",
          local(t.local) ? h("span", { class: "muted" }, ` (${local(t.local)})`) : null, t.dst ? h("span", { class: "dst" }, ` ${t.dst.detail}`) : null))));
    } catch (error) {
      if (mine !== asked) return;
      const name = error.field === "$.timezone" ? "timezone" : "cron_expression";
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

  let typing;
  const later = () => { clearTimeout(typing); typing = setTimeout(checkSchedule, 250); };
  controls.cron_expression.addEventListener("input", later);
  controls.timezone.addEventListener("input", later);
  controls.payload.addEventListener("input", checkPayload);
  controls.kind.addEventListener("change", () => {
    if (!job) controls.payload.value = PAYLOAD_HINT[controls.kind.value];
    checkPayload();
  });

  const form = h("form", { id: "job-form", novalidate: true },
    h("div", { class: "form-grid" },
      field("name", "Name", controls.name),
      field("cron_expression", "Schedule (cron)", controls.cron_expression,
        "5 fields, 6 with seconds first, or @hourly, @daily, …"),
      field("timezone", "Time zone (IANA)", controls.timezone),
      field("kind", "Kind", controls.kind),
      field("status", "Status", controls.status)),
    h("section", { class: "preview-box", "aria-label": "Schedule preview" }, preview),
    field("payload", "Payload (JSON)", controls.payload, "Secrets show as *** and are kept when sent back unchanged."),
    h("details", {}, h("summary", {}, "Policies"),
      h("div", { class: "form-grid" },
        NUMBERS.map(([name, label]) => field(name, label, controls[name])),
        field("concurrency_policy", "Concurrency", controls.concurrency_policy),
        field("misfire_policy", "Misfire", controls.misfire_policy),
        field("queue", "Queue", controls.queue, "Executors started with --queue NAME run it."))),
    h("p", { class: "problem", id: "form-problem", role: "alert" }),
    h("div", { class: "actions" }, save, h("a", { class: "button", href: job ? `#/jobs/${id}` : "#/jobs" }, "Cancel")));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const name of Object.keys(controls)) problem(name, null);
    problem("form", null);
    const payload = checkPayload();
    if (payload === undefined) return controls.payload.focus();
    const body = { payload };
    for (const name of ["name", "cron_expression", "timezone", "kind", "status", "concurrency_policy", "misfire_policy", "queue"]) {
      body[name] = controls[name].value;
    }
    for (const [name] of NUMBERS) body[name] = Number(controls[name].value);
    save.disabled = true;
    try {
      const saved = job ? await patch(`/api/jobs/${id}`, body) : await post("/api/jobs", body);
      flash(job ? "Saved" : "Created");
      location.hash = `#/jobs/${saved.id}`;
    } catch (error) {
      const name = error instanceof ApiError && error.field ? error.field.replace(/^\$\./, "").split(/[.[]/)[0] : "form";
      if (!problem(name, error.message)) problem("form", error.message);
      controls[name]?.closest("details")?.setAttribute("open", ""); // a policy field: show it
      (controls[name] ?? save).focus();
    } finally {
      save.disabled = false;
    }
  });

  replace(main, h("h1", {}, job ? `Edit ${job.name}` : "New job"), form);
  checkSchedule();
  controls.name.focus();
  return null;
}
