// bullsweep dashboard: progressive enhancement only; every page reads without it.
// - A filter form submits itself when one of its selects changes.
// - A page marked data-refresh reloads its <main> every N seconds while the tab is visible.
"use strict";
document.querySelectorAll("form.filters select").forEach(function (el) {
  el.addEventListener("change", function () { el.form.submit(); });
});
(function () {
  var main = document.querySelector("main[data-refresh]");
  if (!main) { return; }
  var every = parseInt(main.getAttribute("data-refresh"), 10) * 1000;
  setInterval(function () {
    if (document.visibilityState !== "visible") { return; }
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        if (next) { main.innerHTML = next.innerHTML; }
      })
      .catch(function () {});
  }, every);
})();
