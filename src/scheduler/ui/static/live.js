/* Tickwheel dashboard: live refresh of a list page. Every few seconds, while the
   header's "Live" box is ticked (remembered in localStorage), the page is fetched
   again and each [data-live-region] is swapped for its fresh copy: the filter form,
   the scroll position and the focus stay as they are. A tick is skipped while the
   user selects text or has the focus inside a region, or the tab is hidden. The
   overview polls its JSON instead (app.js) and asks window.tickwheelLive.on(). */
(function () {
  "use strict";
  var KEY = "tickwheel-live";
  var toggle = document.getElementById("live-toggle");
  var interval = Number(document.body.dataset.liveMs || 5000);
  var timer = null;
  var api = {
    on: function () { return !!toggle && toggle.checked; },
    running: false,
    refreshes: 0
  };
  window.tickwheelLive = api;
  if (!toggle) { return; }
  try { toggle.checked = localStorage.getItem(KEY) !== "off"; } catch (e) { /* storage off: live */ }

  function regions() { return document.querySelectorAll("[data-live-region]"); }

  function userBusy() {
    var sel = window.getSelection ? window.getSelection() : null;
    if (sel && !sel.isCollapsed && String(sel).trim()) { return true; }
    var active = document.activeElement;
    return Array.prototype.some.call(regions(), function (r) { return r.contains(active); });
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    regions().forEach(function (el) {
      var name = el.getAttribute("data-live-region");
      var next = fresh.querySelector('[data-live-region="' + name + '"]');
      if (next) { el.replaceWith(document.importNode(next, true)); }
    });
    api.refreshes += 1;
    document.documentElement.setAttribute("data-live-refreshes", String(api.refreshes));
  }

  function tick() {
    timer = null;
    if (!api.on()) { return; }
    if (document.hidden || userBusy()) { schedule(); return; }
    fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
      .then(function (html) { if (html && api.on()) { swap(html); } })
      .catch(function () { /* the next tick tries again */ })
      .finally(schedule);
  }

  function schedule() {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    api.running = api.on();
    document.documentElement.setAttribute("data-live", api.running ? "on" : "off");
    if (api.running && regions().length) { timer = setTimeout(tick, interval); }
  }

  toggle.addEventListener("change", function () {
    try { localStorage.setItem(KEY, toggle.checked ? "on" : "off"); } catch (e) { /* kept for this page only */ }
    schedule();
  });
  schedule();
})();
