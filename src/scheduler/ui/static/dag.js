/* Tickwheel dashboard: pan and zoom of a workflow's DAG. The SVG's viewBox starts as
   the whole graph, fitted to the page's width; the wheel zooms about the pointer, a
   drag pans, the toolbar's buttons zoom and fit (keyboard users). No library. */
(function () {
  "use strict";
  document.querySelectorAll("svg[data-pan-zoom]").forEach(function (svg) {
    var b = svg.viewBox.baseVal;
    var home = { x: b.x, y: b.y, w: b.width, h: b.height };
    var vb = { x: home.x, y: home.y, w: home.w, h: home.h };
    var box = svg.closest("figure") || svg.parentNode;

    function apply() {
      svg.setAttribute("viewBox", [vb.x, vb.y, vb.w, vb.h].join(" "));
      svg.dataset.zoom = (home.w / vb.w).toFixed(3);
    }
    /* Units of the viewBox per CSS pixel, and where a client point falls in the
       viewBox ("meet" centres the box, so the unused band is split on both sides). */
    function scale() {
      var r = svg.getBoundingClientRect();
      return Math.max(vb.w / r.width, vb.h / r.height);
    }
    function at(ev) {
      var r = svg.getBoundingClientRect(), s = scale();
      return {
        x: vb.x - (r.width * s - vb.w) / 2 + (ev.clientX - r.left) * s,
        y: vb.y - (r.height * s - vb.h) / 2 + (ev.clientY - r.top) * s
      };
    }
    function zoom(factor, p) {
      var w = Math.min(home.w * 4, Math.max(home.w / 20, vb.w / factor));
      var f = vb.w / w;
      p = p || { x: vb.x + vb.w / 2, y: vb.y + vb.h / 2 };
      vb = { x: p.x - (p.x - vb.x) / f, y: p.y - (p.y - vb.y) / f, w: w, h: vb.h / f };
      apply();
    }
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      zoom(ev.deltaY < 0 ? 1.25 : 0.8, at(ev));
    }, { passive: false });

    var drag = null, dragged = false;
    svg.addEventListener("pointerdown", function (ev) {
      if (ev.button !== 0) { return; }
      drag = { x: ev.clientX, y: ev.clientY, vx: vb.x, vy: vb.y, s: scale() };
      dragged = false;
    });
    window.addEventListener("pointermove", function (ev) {
      if (!drag) { return; }
      var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (!dragged && Math.abs(dx) + Math.abs(dy) < 4) { return; }
      dragged = true;
      svg.classList.add("dragging");
      vb.x = drag.vx - dx * drag.s;
      vb.y = drag.vy - dy * drag.s;
      apply();
    });
    window.addEventListener("pointerup", function () {
      drag = null;
      svg.classList.remove("dragging");
    });
    /* A drag that ends on a node is a pan, not a click on its link. */
    svg.addEventListener("click", function (ev) {
      if (dragged) { ev.preventDefault(); dragged = false; }
    }, true);

    box.querySelectorAll("[data-dag-zoom]").forEach(function (button) {
      button.addEventListener("click", function () {
        var how = button.dataset.dagZoom;
        if (how === "fit") { vb = { x: home.x, y: home.y, w: home.w, h: home.h }; apply(); }
        else { zoom(how === "in" ? 1.25 : 0.8); }
      });
    });
    apply();
  });
})();
