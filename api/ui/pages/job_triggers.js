// A job's trigger URLs (docs/triggers.md), shown under its edit form: create (the secret shown
// this once, never again), list (live and revoked, no secret), revoke. Each is its own API call
// (POST, GET, DELETE /api/jobs/{id}/triggers): the form's Save never sends any of them.
import { ApiError, del, get, post } from "../api.js";
import { flash, showError } from "../feedback.js";
import { h, replace, table, time } from "../dom.js";

export function triggersSection(id) {
  const list = h("div", { id: "triggers-list", "aria-live": "polite" });
  const shown = h("div", { id: "trigger-secret", "aria-live": "polite" });
  const name = h("input", { id: "trigger-name", name: "trigger-name", value: "ci", maxlength: 100, required: true });
  const signed = h("input", { id: "trigger-signed", name: "trigger-signed", type: "checkbox" });
  const rate = h("input", { id: "trigger-rate", name: "trigger-rate", type: "number", min: 1, max: 10000,
    value: 60 });

  async function refresh() {
    try {
      const { items } = await get(`/api/jobs/${id}/triggers`);
      replace(list, table("Trigger URLs", [
        ["ID", (t) => String(t.id)],
        ["Name", (t) => t.name],
        ["URL", (t) => h("code", {}, `/hooks/${t.id}`)],
        ["Auth", (t) => (t.signed ? "signed" : "bearer")],
        ["Rate/min", (t) => String(t.rate_per_minute)],
        ["Created", (t) => h("span", {}, time(t.created_at), ` by ${t.created_by}`)],
        ["State", (t) => (t.revoked_at ? h("span", {}, "revoked ", time(t.revoked_at))
          : h("button", { type: "button", class: "danger", id: `revoke-${t.id}`, onclick: () => revoke(t) },
            "Revoke"))],
      ], items, "No trigger URLs."));
    } catch (error) {
      showError(list, error);
    }
  }

  async function revoke(t) {
    if (!confirm(`Revoke trigger "${t.name}"? Its calls get 404 at once.`)) return;
    try {
      await del(`/api/jobs/${id}/triggers/${t.id}`);
      flash(`Revoked trigger ${t.id}`);
    } catch (error) {
      flash(error instanceof ApiError ? error.message : String(error));
    }
    await refresh();
  }

  async function create(event) {
    event.preventDefault();
    try {
      const made = await post(`/api/jobs/${id}/triggers`, {
        name: name.value.trim(), signed: signed.checked, rate_per_minute: Number(rate.value),
      });
      const how = made.signed ? "Sign each call with it (webhook-id, webhook-timestamp, webhook-signature)."
        : "Send it as Authorization: Bearer <secret>.";
      // The one time the secret is shown: kept only in this element, gone once the page is left.
      replace(shown, h("div", { class: "notice", role: "status" },
        h("p", {}, `Trigger ${made.id} "${made.name}": POST `, h("code", {}, made.url),
          ". Its secret, shown this once: copy it now. ", how),
        h("input", { id: "trigger-secret-value", readonly: true, value: made.secret, size: 60,
          "aria-label": "The trigger's secret", onfocus: (e) => e.target.select() })));
      flash(`Created trigger ${made.id}`);
    } catch (error) {
      replace(shown);
      showError(shown, error);
    }
    await refresh();
  }

  const node = h("section", { id: "triggers", "aria-labelledby": "triggers-h" },
    h("h2", { id: "triggers-h" }, "Trigger URLs"),
    h("p", { class: "hint muted small" }, "A URL a CI system calls to start a run without an API token. ",
      "Its secret is shown once, when it is made."),
    list,
    h("form", { id: "trigger-form", class: "form-grid", onsubmit: create },
      h("label", { for: "trigger-name" }, "Name"), name,
      h("label", { for: "trigger-signed" }, "Signed (Standard Webhooks)"), signed,
      h("label", { for: "trigger-rate" }, "Calls a minute"), rate,
      h("button", { type: "submit", id: "trigger-create" }, "Create trigger URL")),
    shown);
  return { node, refresh };
}
