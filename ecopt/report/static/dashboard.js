// ecopt dashboard: poll the study's state and redraw in place (no page reload).
// Served by `ecopt dashboard` itself; every HTML fragment it inserts was escaped by the
// server (ecopt.report.html._e), and the page's CSP forbids inline scripts anyway.
// The first reply is the full state; later ones hold only what changed since the version
// this page has (new table rows, new chart points, changed blocks): see state_changes().
(function () {
  "use strict";
  var refreshMs = parseInt(document.body.getAttribute("data-refresh-ms"), 10) || 2000;
  var version = null;
  var figures = {};  // element id -> {data: [...], layout: {...}}: what is drawn now
  var revision = 0;  // Plotly.react redraws data whose revision changed
  var config = {displaylogo: false, responsive: true,
                modeBarButtonsToRemove: ["sendDataToCloud", "select2d", "lasso2d"]};

  function setStatus(text, offline) {
    var el = document.getElementById("status");
    el.textContent = text;
    el.className = offline ? "offline" : "";
  }

  function draw(id) {
    var fig = figures[id];
    if (window.Plotly && document.getElementById(id)) {
      revision += 1;
      fig.layout.datarevision = revision;
      window.Plotly.react(id, fig.data, fig.layout, config);
    }
  }

  function setHtml(html) {
    Object.keys(html).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.innerHTML = html[id]; }
    });
  }

  function header(state) {
    document.title = state.title;
    document.getElementById("title").textContent = state.title;
    document.body.setAttribute("data-trials", String(state.n_trials));
  }

  function render(state) {
    var waiting = document.getElementById("waiting");
    if (state.waiting) {
      waiting.textContent = state.waiting;
      waiting.hidden = false;
      return;
    }
    waiting.hidden = true;
    setHtml(state.html);
    figures = {};
    Object.keys(state.figures).forEach(function (id) {
      figures[id] = state.figures[id];
      draw(id);
    });
    header(state);
  }

  // A row of the trials table, from the server's escaped HTML.
  function rowFrom(html) {
    var body = document.createElement("tbody");
    body.innerHTML = html;
    return body.firstElementChild;
  }

  function applyRows(rows) {
    var table = document.querySelector("#trials-table tbody");
    if (!table) { return false; }
    rows.replace.forEach(function (r) {
      var old = document.getElementById("trial-" + r[0]);
      if (old) { old.replaceWith(rowFrom(r[1])); }
    });
    rows.add.forEach(function (r) {  // newest first: before the first row with a smaller number
      var row = rowFrom(r[1]);
      var next = null;
      for (var i = 0; i < table.rows.length; i++) {
        if (parseInt(table.rows[i].getAttribute("data-n"), 10) < r[0]) { next = table.rows[i]; break; }
      }
      table.insertBefore(row, next);
    });
    return true;
  }

  function applyFigure(id, change) {
    var fig = figures[id] || {data: [], layout: {}};
    var byUid = {};
    fig.data.forEach(function (t) { byUid[t.uid] = t; });
    (change.traces || []).forEach(function (c) {
      if (c.trace) { byUid[c.uid] = c.trace; return; }
      var t = Object.assign({}, byUid[c.uid]);
      Object.keys(c.extend || {}).forEach(function (k) { t[k] = (t[k] || []).concat(c.extend[k]); });
      if (c.name !== undefined) { t.name = c.name; }
      byUid[c.uid] = t;
    });
    var order = change.order || fig.data.map(function (t) { return t.uid; });
    figures[id] = {data: order.map(function (uid) { return byUid[uid]; }),
                   layout: change.layout || fig.layout};
    draw(id);
  }

  function applyChanges(delta) {
    document.getElementById("waiting").hidden = true;
    setHtml(delta.html);
    if (!applyRows(delta.rows)) { return false; }
    Object.keys(delta.figures).forEach(function (id) { applyFigure(id, delta.figures[id]); });
    header(delta);
    return true;
  }

  function tick() {
    var url = "api/state" + (version ? "?since=" + encodeURIComponent(version) : "");
    fetch(url, {cache: "no-store", credentials: "same-origin"})
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      })
      .then(function (state) {
        if (state.unchanged) {
          // nothing new
        } else if (state.changes) {
          if (state.since === version && applyChanges(state)) {
            version = state.version;
          } else {
            version = null;  // out of step: ask for the full state next time
          }
        } else {
          version = state.version;
          render(state);
        }
        var t = new Date().toLocaleTimeString();
        setStatus("live, refreshed every " + refreshMs / 1000 + " s (checked " + t + ")", false);
      })
      .catch(function (err) {
        setStatus("not updating: " + err.message + " (is `ecopt dashboard` still running?)", true);
      })
      .then(function () { window.setTimeout(tick, refreshMs); });
  }

  tick();
})();
