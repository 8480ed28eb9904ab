// Building the page: every piece of data goes in as text (textContent), never as HTML.

/** h("a", {href: "#/jobs", class: "x"}, "text", child) -> an element. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// --- formatting -------------------------------------------------------------------------

export function ms(value) {
  if (value === null || value === undefined) return "–";
  const abs = Math.abs(value);
  if (abs < 1000) return `${Math.round(value)} ms`;
  if (abs < 60_000) return `${(value / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`;
  if (abs < 3_600_000) return `${(value / 60_000).toFixed(1)} min`;
  if (abs < 172_800_000) return `${(value / 3_600_000).toFixed(1)} h`;
  return `${(value / 86_400_000).toFixed(1)} days`;
}

/** "in 3 min" / "12 s ago" from now. */
export function relative(iso) {
  if (!iso) return "–";
  const diff = new Date(iso).getTime() - Date.now();
  const text = ms(Math.abs(diff)).replace(/\.\d+ /, " ").replace(" ms", " ms");
  return diff >= 0 ? `in ${text}` : `${text} ago`;
}

/** A fire time's wall time in its zone: 2026-03-29 03:00 +02:00 (nothing for UTC, already shown). */
export function local(text) {
  if (text.endsWith("+00:00")) return null;
  return text.replace("T", " ").replace(/:00([+-]\d\d:\d\d)$/, " $1");
}

/** 2026-01-05 07:30:00 UTC */
export function utc(iso) {
  if (!iso) return "–";
  return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

export function time(iso) {
  return iso ? h("time", { datetime: iso, title: utc(iso) }, relative(iso)) : "–";
}

export function badge(state) {
  return h("span", { class: `badge badge-${state}` }, state);
}

export function percent(rate) {
  if (rate === null || rate === undefined) return "–";
  return `${(rate * 100).toFixed(rate === 1 || rate === 0 ? 0 : 1)} %`;
}

/** A definition list from [label, value] pairs. */
export function fields(pairs) {
  return h("dl", { class: "fields" }, pairs.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]));
}

/** A table: columns [label, (row) => cell]; each cell carries its label for the phone layout. */
export function table(caption, columns, rows, empty = "Nothing yet.") {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h(
    "table",
    { class: "grid" },
    h("caption", { class: "sr-only" }, caption),
    h("thead", {}, h("tr", {}, columns.map(([label]) => h("th", { scope: "col" }, label)))),
    h(
      "tbody",
      {},
      rows.map((row) =>
        h("tr", {}, columns.map(([label, cell]) => h("td", { dataset: { label } }, h("div", {}, cell(row))))),
      ),
    ),
  );
}
