// A run's output (docs/run-output.md) on its page: the lines so far, then, while the run runs, each
// line as its executor writes it (the follow stream, read with fetch: the token goes in a header,
// which EventSource cannot send), and once the run ended its whole output read again.
import { api, token } from "../api.js";
import { h } from "../dom.js";

const PAGE = 500;
const ACTIVE = ["queued", "waiting", "running"];

export function runOutput(runId, alive) {
  const lines = h("pre", { class: "output", id: "output", tabindex: "0" });
  const status = h("p", { class: "muted", id: "output-status" }, "Loading the output…");
  const section = h("section", { "aria-labelledby": "output-h" }, h("h2", { id: "output-h" }, "Output"), status, lines);
  let next = 0;
  let started = false;
  let following = false;
  let whole = false; // the run ended and its whole output is shown

  function add(items) {
    for (const item of items) {
      lines.append(h("span", { class: `line ${item.stream}`, "data-seq": String(item.seq) }, item.line, "\n"));
      next = item.seq + 1;
    }
  }

  function said(count, state) {
    status.textContent = count ? `${count} line${count === 1 ? "" : "s"}${ACTIVE.includes(state) ? " so far" : ""}.`
      : ACTIVE.includes(state) ? "Nothing written yet." : "The run wrote nothing.";
  }

  async function readAll() {
    const shown = [];
    for (let offset = 0; ; ) {
      const page = await api("GET", `/api/runs/${runId}/output?offset=${offset}&limit=${PAGE}`);
      shown.push(...page.lines);
      offset = page.next_offset;
      if (page.lines.length < PAGE) {
        if (!alive()) return;
        lines.replaceChildren();
        add(shown);
        said(shown.length, page.state);
        whole = page.ended;
        return;
      }
    }
  }

  async function follow() {
    following = true;
    try {
      const headers = { Accept: "text/event-stream" };
      if (token()) headers.Authorization = `Bearer ${token()}`;
      const response = await fetch(`/api/runs/${runId}/output/follow?offset=${next}`,
        { headers, credentials: "omit", cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      status.textContent = "Following: lines appear as the run writes them.";
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      while (alive()) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const event = block.match(/^event: (.*)$/m)?.[1] ?? "message";
          const data = block.match(/^data: (.*)$/m)?.[1];
          if (data === undefined) continue; // a keepalive comment
          if (event === "end") {
            await readAll(); // the whole output, as it was kept (a bound may have cut some lines)
            return;
          }
          add([JSON.parse(data)]);
        }
      }
      reader.cancel().catch(() => {});
    } catch (error) {
      status.textContent = `Not following any more (${error.message}); the page shows the output once the run ends.`;
    } finally {
      following = false;
    }
  }

  /** Called with the run at each refresh of its page. */
  async function update(run) {
    if (!started) {
      started = true;
      await readAll();
    }
    if (whole || following) return;
    if (ACTIVE.includes(run.state)) follow(); // goes on by itself until the run ends
    else await readAll();
  }

  return { section, update };
}
