// Says why the console did not start when its module script cannot load at all: browsers refuse
// module scripts (and wasm fetches) on pages opened from a file:// URL. A classic script, so it
// runs where boot.js cannot; it does nothing when the app starts normally.
(function () {
  function show(detail) {
    if (document.getElementById("backend-unavailable")) return;
    const banner = document.createElement("div");
    banner.id = "error-banner";
    banner.className = "error-banner";
    banner.setAttribute("role", "alert");
    banner.textContent = "backend not available: " + detail;
    const box = document.createElement("div");
    box.id = "backend-unavailable";
    box.className = "unavailable";
    const h = document.createElement("h2");
    h.textContent = "Backend not available";
    const p = document.createElement("p");
    p.textContent =
      "This is Toolwarden's desktop console. Open it in the Toolwarden desktop app " +
      "(toolwarden-desktop); to look at it in a browser, serve ui/dist over HTTP.";
    box.append(h, p);
    const main = document.createElement("main");
    main.className = "main";
    main.append(banner, box);
    document.body.prepend(main);
  }
  // A script that fails to load fires "error" on its element; it does not bubble, so listen in
  // the capture phase.
  window.addEventListener(
    "error",
    function (e) {
      const el = e.target;
      if (el && el.tagName === "SCRIPT") {
        show("the console's code could not be loaded from " + location.protocol + " pages");
      }
    },
    true
  );
})();
