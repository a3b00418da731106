// bullsweep dashboard: progressive enhancement only; every page reads without it.
// - A filter form submits itself when one of its selects changes.
// - A page marked data-refresh reloads its <main> every N seconds while the tab is visible.
// - A chart's points (each a focusable column with its values as its name) show their values
//   under the chart on hover and focus; the arrow keys, Home and End move between them.
"use strict";
document.querySelectorAll("form.filters select").forEach(function (el) {
  el.addEventListener("change", function () { el.form.submit(); });
});
function charts(root) {
  root.querySelectorAll("figure.chart").forEach(function (fig) {
    var hits = Array.prototype.slice.call(fig.querySelectorAll(".hit"));
    var out = fig.querySelector(".readout");
    if (!hits.length || !out) { return; }
    function show(el) { out.textContent = el.getAttribute("aria-label"); }
    hits.forEach(function (el, i) {
      el.addEventListener("mouseenter", function () { show(el); });
      el.addEventListener("focus", function () { show(el); });
      el.addEventListener("keydown", function (ev) {
        var to = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: hits.length - 1 }[ev.key];
        if (to === undefined || to < 0 || to >= hits.length) { return; }
        ev.preventDefault();
        el.setAttribute("tabindex", "-1");
        hits[to].setAttribute("tabindex", "0");
        hits[to].focus();
      });
    });
  });
}
charts(document);
(function () {
  var main = document.querySelector("main[data-refresh]");
  if (!main) { return; }
  var every = parseInt(main.getAttribute("data-refresh"), 10) * 1000;
  setInterval(function () {
    if (document.visibilityState !== "visible") { return; }
    // A reader inside the page (a focused chart, an open table) keeps its place.
    if (main.contains(document.activeElement) && document.activeElement !== main) { return; }
    if (main.querySelector("details[open]")) { return; }
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        if (next) { main.innerHTML = next.innerHTML; charts(main); }
      })
      .catch(function () {});
  }, every);
})();
