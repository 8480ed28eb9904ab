// The header's account corner: "Sign in with <provider>" when the server offers sign-in and nobody
// is signed in here; the person and "Sign out" once they are. Nothing when sign-in is off.
import { signInState, signOut } from "./api.js";

export async function showAccount() {
  const state = await signInState();
  const who = document.getElementById("who");
  const signIn = document.getElementById("sign-in");
  const out = document.getElementById("sign-out");
  if (state.actor) {
    who.textContent = state.actor.replace(/^oidc:/, "");
    who.title = `scopes: ${(state.scopes ?? []).join(", ")}`;
    who.hidden = false;
    out.hidden = false;
    out.addEventListener("click", () => signOut());
  } else if (state.provider) {
    signIn.textContent = `Sign in with ${state.provider}`;
    signIn.hidden = false;
  }
}
