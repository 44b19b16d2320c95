/* Tickwheel dashboard: charts (uPlot) and live refresh of the overview. No framework,
   no build step; every value is written with textContent (never as HTML). */
(function () {
  "use strict";
  var script = document.currentScript;
  var page = script.dataset.page;
  var liveUrl = script.dataset.live;
  var allTenants = script.dataset.allTenants === "yes";
  var namesEl = document.getElementById("tenant-names");
  var tenantNames = namesEl ? JSON.parse(namesEl.textContent) : {};
  var dataEl = document.getElementById("page-data");
  var data = dataEl ? JSON.parse(dataEl.textContent) : null;
  var charts = {};
  var POOL_COLOURS = { CRITICAL: "#b42318", STANDARD: "#1f5fbf", BULK: "#1a7f37" };

  function q(testid) { return document.querySelector('[data-testid="' + testid + '"]'); }
  function setText(testid, value) { var el = q(testid); if (el) { el.textContent = String(value); } }

  /* Times as the rest of the dashboard writes them: ISO, 24-hour, UTC. */
  function utc(ts, withSeconds) {
    var iso = new Date(ts * 1e3).toISOString();
    return withSeconds ? iso.slice(11, 19) : iso.slice(11, 16);
  }

  function timeTicks(u, splits) {
    var step = splits.length > 1 ? splits[1] - splits[0] : 60;
    var seconds = step < 60 || splits.some(function (t) { return t % 60 !== 0; });
    return splits.map(function (t) { return utc(t, seconds); });
  }

  function numberTicks(u, splits) {
    return splits.map(function (v) { return v.toLocaleString("en-US", { maximumFractionDigits: 3 }); });
  }

  /* An axis as wide as its longest label (uPlot's default is a fixed 50 px, which cut
     10,000 to "0,000"). */
  function axisSize(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1 && axis._size) { return axis._size; }
    var longest = (values || []).reduce(function (a, v) { return String(v).length > a.length ? String(v) : a; }, "");
    u.ctx.font = axis.font[0];
    var width = u.ctx.measureText(longest).width / (window.devicePixelRatio || 1);
    return Math.ceil(axis.ticks.size + axis.gap + width + 4);
  }

  function chart(id, series, rows, height) {
    var box = document.getElementById(id);
    if (!box || typeof uPlot === "undefined") { return; }
    if (charts[id]) { charts[id].setData(rows); return; }
    var opts = {
      width: Math.max(300, box.clientWidth || 500),
      height: height || 180,
      legend: { show: false },
      cursor: { show: true },
      scales: { x: { time: true } },
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      series: [{ value: function (u, t) { return t == null ? "" : new Date(t * 1e3).toISOString().slice(0, 19).replace("T", " ") + " UTC"; } }].concat(series),
      axes: [
        { stroke: "#1b1f24", values: timeTicks },
        { stroke: "#1b1f24", values: numberTicks, size: axisSize }
      ]
    };
    charts[id] = new uPlot(opts, rows, box);
  }
  window.tickwheelCharts = charts;

  function activityCharts(act) {
    if (!act || !act.data) { return; }
    var r = act.data.rows, xs = r.map(function (x) { return x.t; });
    chart("chart-throughput", [
      { label: "dispatched/s", stroke: "#1f5fbf", width: 2 },
      { label: "completed/s", stroke: "#1a7f37", width: 2 },
      { label: "failed/s", stroke: "#b42318", width: 2 }
    ], [xs, r.map(function (x) { return x.dispatched_per_s; }), r.map(function (x) { return x.completed_per_s; }), r.map(function (x) { return x.failed_per_s; })]);
    chart("chart-lateness", [
      { label: "p50 ms", stroke: "#6f42c1", width: 2 },
      { label: "p99 ms", stroke: "#b35900", width: 2 }
    ], [xs, r.map(function (x) { return x.p50_ms; }), r.map(function (x) { return x.p99_ms; })]);
  }

  function sumPools(row, key) {
    var s = 0; for (var p in row.pools) { s += row.pools[p][key]; } return s;
  }

  function miniForecast(fc) {
    if (!fc || !fc.data) { return; }
    var r = fc.data.rows;
    chart("chart-forecast-mini", [
      { label: "firing", stroke: "#1f5fbf", width: 2, fill: "rgba(31,95,191,0.12)" },
      { label: "nominal", stroke: "#8a8f98", width: 1.5, dash: [4, 3] }
    ], [r.map(function (x) { return x.t; }), r.map(function (x) { return sumPools(x, "firing"); }), r.map(function (x) { return sumPools(x, "nominal"); })]);
  }

  function forecastChart(fc) {
    if (!fc || !fc.data) { return; }
    var f = fc.data, r = f.rows, series = [], rows = [r.map(function (x) { return x.t; })];
    f.pools.forEach(function (p) {
      series.push({ label: p + " firing", stroke: POOL_COLOURS[p] || "#333", width: 2 });
      rows.push(r.map(function (x) { return x.pools[p].firing; }));
      series.push({ label: p + " nominal", stroke: POOL_COLOURS[p] || "#333", width: 1.5, dash: [4, 3] });
      rows.push(r.map(function (x) { return x.pools[p].nominal; }));
    });
    chart("chart-forecast", series, rows, 300);
  }

  function cell(tr, text, header) {
    var td = document.createElement(header ? "th" : "td");
    if (header) { td.scope = "row"; }
    td.textContent = text; tr.appendChild(td); return td;
  }

  function status(id, section, name) {
    var el = document.getElementById(id);
    if (!el) { return; }
    var text = !section.available ? name + ": not available (this server does not implement it yet)." : (section.error ? name + ": " + section.error : "");
    if (el.textContent.trim() !== text) {
      el.textContent = "";
      if (text) { var p = document.createElement("p"); p.className = section.available ? "msg msg-error" : "na"; p.dataset.testid = section.available ? "section-error" : "not-available"; p.textContent = text; el.appendChild(p); }
    }
  }

  /* "5m ago" / "in 3s", as the server's relative times read. */
  function relative(iso) {
    var delta = (Date.parse(iso) - Date.now()) / 1000, n = Math.abs(delta);
    if (n < 1) { return "now"; }
    var units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]], text = "";
    for (var i = 0; i < units.length; i++) {
      if (n >= units[i][1]) { text = Math.floor(n / units[i][1]) + units[i][0]; break; }
    }
    return delta < 0 ? text + " ago" : "in " + text;
  }

  function updateUnserved(groups) {
    var section = document.getElementById("unserved"), body = document.getElementById("unserved-rows");
    if (!section || !body) { return; }
    var here = new URLSearchParams(location.search).get("tenant");
    body.textContent = "";
    var total = 0;
    groups.forEach(function (g) {
      total += g.count;
      var tr = document.createElement("tr"); tr.dataset.testid = "unserved-" + g.type;
      if (allTenants) { cell(tr, tenantNames[g.tenant_id] || g.tenant_id.slice(0, 8)).title = g.tenant_id; }
      var th = cell(tr, "", true), a = document.createElement("a");
      var params = new URLSearchParams({ type: g.type, pool: g.pool });
      var tenant = allTenants ? g.tenant_id : here;
      if (tenant) { params.set("tenant", tenant); }
      a.href = "/tasks?" + params.toString(); a.textContent = g.type; th.appendChild(a);
      cell(tr, g.pool); cell(tr, g.count).className = "num";
      var td = cell(tr, ""), t = document.createElement("time");
      t.dateTime = g.oldest_due_at; t.title = g.oldest_due_at.replace("T", " ").replace("Z", "") + " UTC";
      t.textContent = relative(g.oldest_due_at); td.appendChild(t);
      body.appendChild(tr);
    });
    setText("unserved-total", total);
    section.hidden = groups.length === 0;
  }

  function updateOverview(d) {
    status("counts-status", d.counts, "Counts");
    status("activity-status", d.activity, "Activity");
    status("workers-status", d.workers, "Workers");
    status("forecast-status", d.forecast, "Forecast");
    if (d.counts.data) {
      var c = d.counts.data;
      d.states.forEach(function (s) { setText("count-" + s, c.by_state[s]); });
      setText("count-total", c.total);
      d.pools.forEach(function (p) {
        setText("pool-" + p + "-count", c.by_pool[p]);
        d.states.forEach(function (s) { setText("pool-" + p + "-" + s, c.pool_states[p][s]); });
      });
      setText("as-of", "as of " + c.as_of);
      for (var tid in c.by_tenant) { setText("tenant-count-" + tid, c.by_tenant[tid]); }
    }
    if (d.workers.data) {
      var body = document.getElementById("workers-rows");
      if (body) {
        body.textContent = "";
        d.workers.data.forEach(function (w) {
          var tr = document.createElement("tr"); tr.dataset.testid = "worker-" + w.worker_id;
          cell(tr, w.worker_id, true);
          if (allTenants) { cell(tr, tenantNames[w.tenant_id] || w.tenant_id.slice(0, 8)).title = w.tenant_id; }
          cell(tr, w.task_types.join(", ") || "any"); cell(tr, w.pools.join(", ") || "any");
          cell(tr, w.slots_used); cell(tr, w.slots_free);
          cell(tr, w.paused ? w.waiting + " (" + w.paused + " paused)" : w.waiting);
          cell(tr, w.start_on_delivery ? "yes" : "no");
          cell(tr, w.last_seen ? w.last_seen.slice(0, 19).replace("T", " ") : "—"); cell(tr, w.node_id);
          body.appendChild(tr);
        });
      }
      var none = document.getElementById("no-workers");
      if (none) { none.hidden = d.workers.data.length > 0; }
    }
    if (d.unserved && d.unserved.data) { updateUnserved(d.unserved.data); }
    if (d.forecast.data && d.forecast.data.held) {
      var held = d.forecast.data.held, paused = document.getElementById("paused");
      setText("held-paused", held.paused); setText("held-rate-limited", held.rate_limited);
      if (paused && (held.paused > 0 || held.rate_limited > 0)) { paused.hidden = false; }
    }
    if (d.activity.data) {
      var ab = document.getElementById("activity-rows");
      if (ab) {
        ab.textContent = "";
        d.activity.data.rows.forEach(function (r) {
          var tr = document.createElement("tr");
          [r.start.slice(0, 19).replace("T", " "), r.dispatched, r.completed, r.failed, r.p50_ms, r.p99_ms].forEach(function (v) { cell(tr, v); });
          ab.appendChild(tr);
        });
      }
    }
    if (d.forecast.data) {
      var tot = 0; for (var p in d.forecast.data.totals) { tot += d.forecast.data.totals[p].firing; }
      setText("forecast-total-firing", tot);
      setText("forecast-peak", d.forecast.data.peak_firing);
    }
    activityCharts(d.activity);
    miniForecast(d.forecast);
  }

  function live() { return !window.tickwheelLive || window.tickwheelLive.on(); }

  function poll() {
    if (!live() || document.hidden) { setTimeout(poll, 2000); return; }
    fetch(liveUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d && live()) { updateOverview(d); } })
      .catch(function () { /* the next poll tries again */ })
      .finally(function () { setTimeout(poll, 2000); });
  }

  if (page === "overview" && data) {
    activityCharts(data.activity);
    miniForecast(data.forecast);
    if (liveUrl) { setTimeout(poll, 2000); }
  } else if (page === "forecast" && data) {
    forecastChart(data.forecast);
  }
})();
