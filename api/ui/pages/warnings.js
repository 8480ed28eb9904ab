// A saved job's warnings (api.task_routing: e.g. no live executor serves its task action): told in
// the status line with what was saved, and kept there longer than a plain flash.
import { flash } from "../feedback.js";

export function flashSaved(text, warnings = []) {
  if (!warnings.length) return flash(text);
  const status = document.getElementById("status");
  const told = `${text}. Warning: ${warnings.map((w) => w.message).join(" ")}`;
  status.textContent = told;
  setTimeout(() => { if (status.textContent === told) status.textContent = ""; }, 20000);
}
