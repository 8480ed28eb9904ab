// The namespace the console works in (issue 41): chosen on the jobs page, kept in this tab's
// sessionStorage; `default` (what a request naming none acts on) until another is chosen.

const KEY = "cronos.namespace";
export const DEFAULT = "default";

export function currentNamespace() {
  return sessionStorage.getItem(KEY) || DEFAULT;
}

export function chooseNamespace(name) {
  if (name && name !== DEFAULT) sessionStorage.setItem(KEY, name);
  else sessionStorage.removeItem(KEY);
}

/** `{namespace}` for query(): left out for `default`, so the console's calls there are as before. */
export function inNamespace() {
  const name = currentNamespace();
  return name === DEFAULT ? {} : { namespace: name };
}
