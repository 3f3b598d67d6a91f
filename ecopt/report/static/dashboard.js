// ecopt dashboard: poll the study's state and redraw in place (no page reload).
// Served by `ecopt dashboard` itself; every HTML fragment it inserts was escaped by the
// server (ecopt.report.html._e), and the page's CSP forbids inline scripts anyway.
(function () {
  "use strict";
  var refreshMs = parseInt(document.body.getAttribute("data-refresh-ms"), 10) || 2000;
  var version = null;
  var config = {displaylogo: false, responsive: true,
                modeBarButtonsToRemove: ["sendDataToCloud", "select2d", "lasso2d"]};

  function setStatus(text, offline) {
    var el = document.getElementById("status");
    el.textContent = text;
    el.className = offline ? "offline" : "";
  }

  function render(state) {
    var waiting = document.getElementById("waiting");
    if (state.waiting) {
      waiting.textContent = state.waiting;
      waiting.hidden = false;
      return;
    }
    waiting.hidden = true;
    document.title = state.title;
    document.getElementById("title").textContent = state.title;
    Object.keys(state.html).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.innerHTML = state.html[id]; }
    });
    Object.keys(state.figures).forEach(function (id) {
      var fig = state.figures[id];
      if (window.Plotly && document.getElementById(id)) {
        window.Plotly.react(id, fig.data, fig.layout, config);
      }
    });
    document.body.setAttribute("data-trials", String(state.n_trials));
  }

  function tick() {
    var url = "api/state" + (version ? "?since=" + encodeURIComponent(version) : "");
    fetch(url, {cache: "no-store", credentials: "same-origin"})
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      })
      .then(function (state) {
        if (!state.unchanged) {
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
