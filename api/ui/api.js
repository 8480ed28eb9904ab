// Calls to the Cronos API. A 401/403 asks for a bearer token (once: it is kept in this tab's
// sessionStorage) and retries, or offers to sign in with the identity provider when the server
// offers it (docs/sign-in.md). A held token is sent as `Authorization: Bearer` and decides alone;
// without one, a signed-in person's HttpOnly session cookie goes along, and every call that changes
// something carries the session's CSRF token (X-CSRF-Token), which only this origin can read.

const KEY = "cronos.token";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.field = problem?.field ?? null;
    this.problem = problem;
  }
}

export function token() {
  return sessionStorage.getItem(KEY);
}

export function forgetToken() {
  sessionStorage.removeItem(KEY);
}

let signIn = null; // GET /auth/session's answer, asked once per page

/** Whether the server offers sign-in (`provider`), and who is signed in here (`actor`, `csrf`). */
export function signInState() {
  const options = { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" };
  signIn ??= fetch("/auth/session", options)
    .then((r) => (r.ok ? r.json() : {}))
    .catch(() => ({}));
  return signIn;
}

/** Sign out: the server ends the session at once; the page starts again. */
export async function signOut() {
  const state = await signInState();
  const headers = { "X-CSRF-Token": state.csrf ?? "" };
  await fetch("/auth/logout", { method: "POST", headers, credentials: "same-origin" });
  signIn = null;
  location.assign("/");
}

let asking = null; // one dialog for every call waiting on it

function askToken(reason) {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  document.getElementById("token-reason").textContent = reason;
  input.value = "";
  signInState().then((state) => {
    const link = document.getElementById("token-signin");
    link.hidden = !state.provider;
    link.textContent = `Sign in with ${state.provider}`;
  });
  asking = new Promise((resolve) => {
    const done = (value) => {
      form.removeEventListener("submit", submit);
      document.getElementById("token-cancel").removeEventListener("click", cancel);
      dialog.removeEventListener("cancel", cancel);
      if (dialog.open) dialog.close();
      asking = null;
      resolve(value);
    };
    const submit = (event) => {
      event.preventDefault(); // the CSP allows no form submission; nothing leaves the page
      const value = input.value.trim();
      if (value) sessionStorage.setItem(KEY, value);
      done(value || null);
    };
    const cancel = (event) => {
      event.preventDefault();
      done(null);
    };
    form.addEventListener("submit", submit);
    document.getElementById("token-cancel").addEventListener("click", cancel);
    dialog.addEventListener("cancel", cancel);
    dialog.showModal();
    input.focus();
  });
  return asking;
}

async function send(method, path, body) {
  const headers = { Accept: "application/json" };
  const held = token();
  if (held) headers.Authorization = `Bearer ${held}`;
  else if (method !== "GET") {
    const state = await signInState();
    if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  });
}

/** The parsed JSON answer; throws ApiError with the problem body's detail and field. */
export async function api(method, path, body) {
  let response = await send(method, path, body);
  for (let tries = 0; (response.status === 401 || response.status === 403) && tries < 2; tries++) {
    const problem = await response.json().catch(() => null);
    const slug = problem?.type?.split(":").pop();
    if (slug === "cross-origin") throw new ApiError(response.status, problem);
    if (token() && slug !== "forbidden" && response.status === 401) forgetToken(); // revoked or expired
    const given = await askToken(problem?.detail || "This API needs a token.");
    if (!given) throw new ApiError(response.status, problem);
    response = await send(method, path, body);
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body);
export const patch = (path, body) => api("PATCH", path, body);
export const del = (path) => api("DELETE", path);

/** `?a=1&b=2` without the empty values. */
export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return pairs.length ? `?${new URLSearchParams(pairs)}` : "";
}
