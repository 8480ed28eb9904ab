// Telling the user what happened: an error in place of a section, a short status line.
import { ApiError } from "./api.js";
import { h, replace } from "./dom.js";

export function showError(where, error) {
  const text = error instanceof ApiError ? `${error.message} (HTTP ${error.status})` : String(error.message || error);
  replace(where, h("p", { class: "error", role: "alert" }, text));
}

let flashed; // the timer of the newest flash: an older one must not clear the same text shown again

export function flash(text) {
  const status = document.getElementById("status");
  status.textContent = text;
  clearTimeout(flashed);
  flashed = setTimeout(() => { if (status.textContent === text) status.textContent = ""; }, 4000);
}
