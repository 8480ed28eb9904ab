// The job form's further schedules (docs/schedules.md): the job fires at the union of its own
// schedule and these. Written as the CLI's --schedules takes them, one entry a line (or `;`-separated):
// a cron expression, `TZ=Zone` before one for a zone of its own, or `every DURATION [from ISO]`.
// The preview API checks them as a save would and previews the union.

/** Entries as the form shows them, one a line. */
export function schedulesText(entries) {
  return (entries ?? []).map((e) => (e.every != null
    ? `every ${e.every}${e.anchor ? ` from ${e.anchor}` : ""}`
    : `${e.timezone ? `TZ=${e.timezone} ` : ""}${e.cron}`)).join("\n");
}

/** The text as the API's `schedules`; undefined when an item is neither form (the API checks the rest). */
export function parseSchedules(text) {
  const entries = [];
  for (const item of text.split(/[;\n]/).map((p) => p.trim()).filter(Boolean)) {
    const head = item.split(/\s/)[0];
    const rest = item.slice(head.length).trim();
    if (head.toLowerCase() === "every") {
      const [every, anchor] = rest.split(/\s+from\s+/);
      if (!every) return undefined;
      entries.push(anchor ? { every, anchor } : { every });
    } else if (/^TZ=/i.test(head)) {
      if (!rest || head.length === 3) return undefined;
      entries.push({ cron: rest, timezone: head.slice(3) });
    } else {
      entries.push({ cron: item });
    }
  }
  return entries;
}

/** The preview's query for them: none when there are none (or they cannot be read yet). */
export function schedulesQuery(text) {
  const entries = parseSchedules(text);
  return entries?.length ? { schedules: JSON.stringify(entries) } : {};
}

/** The textarea and its labelled field (made by the form's own `field`). */
export function schedulesField(job, field, h) {
  const control = h("textarea", { id: "schedules", name: "schedules", rows: 3, spellcheck: "false",
    placeholder: "e.g. 0 17 * * 1-5\nTZ=UTC 0 10 * * 6\nevery 90m", "aria-describedby": "preview" });
  control.value = schedulesText(job?.schedules);
  const node = field("schedules", "More schedules", control,
    "One a line: a cron expression, TZ=Zone before one for its own zone, or every DURATION. The job fires at " +
    "the union; an instant two share runs once.");
  return { control, node };
}
