// Starts Toolwarden's console: loads the wasm-bindgen glue and the wasm (whose `main` mounts the
// Leptos app). If the wasm cannot load at all, says so in the page instead of leaving it blank,
// naming the Content-Security-Policy directive when one blocked it (the usual cause in a webview).
import init from "./tw_ui.js";

const blocked = [];
document.addEventListener("securitypolicyviolation", (e) => {
  blocked.push(`${e.effectiveDirective} blocked ${e.blockedURI}`);
});

// The violation event is queued as a task of its own, after the rejected fetch: report a moment
// later so it is in.
init().catch((e) => setTimeout(() => failed(e), 100));

function failed(e) {
  console.error("toolwarden: the console failed to start", e);
  const why = blocked.length ? ` (Content-Security-Policy: ${blocked.join("; ")})` : "";
  const box = document.createElement("div");
  box.id = "error-banner";
  box.className = "error-banner";
  box.setAttribute("role", "alert");
  box.textContent = `The console failed to start: ${e}${why}`;
  document.body.prepend(box);
}
