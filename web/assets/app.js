// leasewrap's pages work without this script. With it: the viewer's local
// time as each time's title, and a run's facts shown on hover or focus.
"use strict";
(function () {
  function local(iso) {
    var d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleString();
  }
  function setLocalTitles(root) {
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      times[i].title = local(times[i].getAttribute("datetime")) + " (your time)";
    }
  }
  function describe(a) {
    var d = a.dataset;
    var parts = [d.outcome];
    if (d.holder !== undefined) parts.push("holder " + d.holder);
    if (d.token) parts.push("token " + d.token);
    if (d.attempt) parts.push("attempt " + d.attempt);
    if (d.exit !== undefined) parts.push("exit " + (d.exit === "" ? "none" : d.exit));
    parts.push(d.start.replace("T", " ").replace("Z", " UTC") + " (" + local(d.start) + " your time)");
    if (d.end) parts.push("to " + d.end.replace("T", " ").replace("Z", " UTC") + " (" + local(d.end) + ")");
    return parts.join(", ");
  }
  function show(event) {
    var a = event.target.closest && event.target.closest("a.run, a.mark");
    var panel = document.getElementById("detail");
    if (!a || !panel) return;
    // textContent, never HTML: the holder id is the database's text.
    panel.textContent = describe(a);
    var active = document.querySelector("a.run.active");
    if (active) active.classList.remove("active");
    a.classList.add("active");
  }
  document.addEventListener("DOMContentLoaded", function () {
    setLocalTitles(document);
    var svg = document.getElementById("timeline");
    if (svg) {
      svg.addEventListener("mouseover", show);
      svg.addEventListener("focusin", show);
    }
  });
})();
