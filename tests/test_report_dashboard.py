"""`ecopt dashboard`: state computed from a growing log, the server's rules, and the page in Chromium."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import ecopt

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("plotly")

from ecopt.report.dashboard import (  # noqa: E402
    HOST,
    DashboardFeed,
    DashboardServer,
    dashboard_state,
    serve,
)

XSS = '<img src=x onerror="window.__xss=1">'
BOLD = "<b>bold</b>"


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def objective(trial: ecopt.Trial) -> dict[str, float]:
    with trial.phase("train", samples=100):
        _spin(0.005)
    x = float(trial.params["x"])
    return {"f1": x, "f2": (1 - x) ** 2 + (0.1 if trial.params["tag"] == BOLD else 0.0)}


def _study(path: Path, name: str = "demo <i>x</i>") -> ecopt.Study:
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "tag": ecopt.Categorical([BOLD, XSS])})
    return ecopt.Study(space, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                       storage=path, sampler="random", meter="estimate", name=name)


def _get(url: str, **kw) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, **kw)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_state_is_computed_from_the_log_and_escapes_study_strings(tmp_path):
    with _study(tmp_path / "s") as st:
        st.optimize(objective, n_trials=3, show_progress=False)
        st.tell(st.ask(params={"x": 0.5, "tag": XSS}), RuntimeError("bad <script>"))
        state = dashboard_state(tmp_path / "s")
    assert state["n_trials"] == 4 and state["name"] == "demo <i>x</i>"
    h = state["html"]
    assert "<i>" not in h["summary"] + h["trials"]
    assert "&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;" in h["trials"]
    assert "bad &lt;script&gt;" in h["trials"] and "<script" not in json.dumps(h)
    assert "estimate-cpu-time" in h["trials"] and "ESTIMATED" in h["banner"]
    front = state["figures"]["fig-front"]
    assert front["layout"]["xaxis"]["title"]["text"] == "f1 [min]"
    hover = " ".join(t for tr in front["data"] for t in tr.get("hovertext", []))
    assert "tag = &lt;b&gt;bold&lt;/b&gt;" in hover and "<b>" not in hover
    trials_fig = state["figures"]["fig-hv-trials"]["data"][0]
    assert trials_fig["x"] == [1, 2, 3, 4]
    energy = state["figures"]["fig-hv-energy"]
    assert "(estimated)" in energy["layout"]["xaxis"]["title"]["text"]
    assert energy["data"][0]["x"] == sorted(energy["data"][0]["x"])


def test_a_torn_last_line_and_a_concurrent_writer_are_read_safely(tmp_path):
    path = tmp_path / "s"
    with _study(path) as st:
        st.optimize(objective, n_trials=2, show_progress=False)
        seen: list[int] = []
        errors: list[BaseException] = []
        done = threading.Event()

        def poll() -> None:
            try:
                while not done.is_set():
                    seen.append(dashboard_state(path)["n_trials"])
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        reader = threading.Thread(target=poll)
        reader.start()
        try:
            st.optimize(objective, n_trials=6, show_progress=False)  # the writer appends
        finally:
            done.set()
            reader.join()
    assert not errors and seen == sorted(seen) and seen[-1] <= 8
    # A writer stopped mid-append: the torn line is skipped and not shown as a problem.
    with open(path / "trials.jsonl", "ab") as f:
        f.write(b'{"number": 8, "state": "compl')
    state = dashboard_state(path)
    assert state["n_trials"] == 8 and state["html"]["warnings"] == ""


def _apply(old: dict, delta: dict) -> dict:
    """What the page does with a delta (ecopt/report/static/dashboard.js), in Python."""
    assert delta["since"] == old["version"] and delta["changes"] is True
    new = json.loads(json.dumps(old))
    new["html"].update(delta["html"])
    rows = dict(re.findall(r'(<tr id="trial-(\d+)".*?</tr>)', new["html"]["trials"]))
    rows = {int(n): html for html, n in rows.items()}
    for n, html in delta["rows"]["replace"] + delta["rows"]["add"]:
        rows[n] = html
    head, _, _ = new["html"]["trials"].partition("<tbody>")
    new["html"]["trials"] = (head + "<tbody>" + "".join(rows[n] for n in sorted(rows, reverse=True))
                             + "</tbody></table></div>")
    for fid, change in delta["figures"].items():
        by_uid = {tr["uid"]: tr for tr in new["figures"][fid]["data"]}
        for c in change.get("traces", []):
            if "trace" in c:
                by_uid[c["uid"]] = c["trace"]
                continue
            tr = by_uid[c["uid"]]
            for k, tail in c.get("extend", {}).items():
                tr[k] = tr[k] + tail
            if "name" in c:
                tr["name"] = c["name"]
        new["figures"][fid] = {"data": [by_uid[u] for u in change["order"]],
                               "layout": change.get("layout", new["figures"][fid]["layout"])}
    for k in ("version", "n_trials", "title", "name"):
        new[k] = delta[k]
    return new


def test_a_refresh_sends_what_changed_and_the_page_rebuilds_the_same_state(tmp_path):
    path = tmp_path / "s"
    feed = DashboardFeed(path)
    with _study(path) as st:
        for x in (0.9, 0.5, 0.8, 0.3, 0.6):  # all on the front (f1 = x, f2 = (1 - x)^2)
            t = st.ask(params={"x": x, "tag": XSS})
            st.tell(t, objective(t))
        st.tell(st.ask(params={"x": 0.2, "tag": BOLD}), RuntimeError("failed <b>"))
        full = feed.changes()
        assert "changes" not in full and full["n_trials"] == 6
        assert feed.changes(full["version"])["unchanged"] is True
        # One trial that dominates one front member: trial 4 = (0.6, 0.16).
        t = st.ask(params={"x": 0.55, "tag": XSS})
        st.tell(t, {"f1": 0.55, "f2": 0.1})
    delta = feed.changes(full["version"])
    after = dashboard_state(path)
    assert delta["changes"] is True and delta["n_trials"] == 7
    assert [n for n, _ in delta["rows"]["add"]] == [6]
    assert [n for n, _ in delta["rows"]["replace"]] == [4]  # left the front: its state changed
    assert "fig-front" in delta["figures"] and "trials" not in delta["html"]
    assert len(json.dumps(delta)) < len(json.dumps(after))  # the sizes: benchmarks/scaling.py
    rebuilt = _apply(full, delta)
    for fid, fig in after["figures"].items():
        assert rebuilt["figures"][fid]["data"] == fig["data"], fid
        assert rebuilt["figures"][fid]["layout"] == fig["layout"], fid
    assert rebuilt["html"] == after["html"]
    # A page with no version, or one the feed no longer keeps, gets the full state.
    assert "changes" not in feed.changes("not-a-version")
    assert feed.changes(None)["n_trials"] == 7


def test_waiting_for_a_study_that_has_not_started(tmp_path):
    state = dashboard_state(tmp_path)
    assert "waiting for a study" in state["waiting"]


def test_server_binds_loopback_only_is_read_only_and_checks_the_host(tmp_path):
    with _study(tmp_path / "s") as st:
        st.optimize(objective, n_trials=1, show_progress=False)
    with DashboardServer(tmp_path / "s", port=0, refresh_s=1) as server:
        assert server._sock.getsockname()[0] == HOST == "127.0.0.1"
        assert server.url == f"http://127.0.0.1:{server.port}/"
        # Another loopback address of this machine: nothing listens there.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.2", server.port), timeout=2).close()
        status, body, headers = _get(server.url)
        assert status == 200 and b"demo &lt;i&gt;x&lt;/i&gt;" in body
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        for method in ("POST", "PUT", "DELETE"):
            assert _get(server.url + "api/state", method=method)[0] == 405
        assert _get(server.url, headers={"Host": "attacker.example"})[0] == 400
        assert _get(server.url + "static/../trials.jsonl")[0] == 404
        assert _get(server.url + "static/other.js")[0] == 404
        status, body, _ = _get(server.url + "static/plotly.min.js")
        assert status == 200 and len(body) > 1_000_000
        version = json.loads(_get(server.url + "api/state")[1])["version"]
        again = json.loads(_get(server.url + f"api/state?since={version}")[1])
        assert again["unchanged"] is True
        # Serving never writes into the study directory.
        before = sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "s").iterdir())
        _get(server.url)
        assert sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "s").iterdir()) == before
    with pytest.raises(ValueError, match="port must be"):
        DashboardServer(tmp_path / "s", port=-1)
    with pytest.raises(ValueError, match="refresh_s"):
        DashboardServer(tmp_path / "s", port=0, refresh_s=0)


def test_taken_port_is_a_clear_error(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        with pytest.raises(ecopt.EcoptError, match="another --port"):
            DashboardServer(tmp_path, port=s.getsockname()[1])
    finally:
        s.close()


def test_cli_dashboard_refuses_a_missing_directory(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ecopt.cli", "dashboard", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "is not a directory" in out.stderr


# ---------------------------------------------------------------------------
# the page in a real headless Chromium
# ---------------------------------------------------------------------------


def chromium(tmp_path: Path):
    """A headless Chromium (Debian's chromium + chromium-driver), closed network friendly."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("Chromium not installed (apt-get install chromium chromium-driver; "
                    ".ci/run installs it)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,1400"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=opts)


def _wait(fn, timeout_s: float = 20.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"condition not met in {timeout_s} s")


@pytest.mark.slow
def test_page_in_chromium_updates_live_and_escapes_markup(tmp_path):
    path = tmp_path / "s"
    with _study(path) as st:
        for x in (0.2, 0.7):
            t = st.ask(params={"x": x, "tag": BOLD})
            st.tell(t, objective(t))
        server = serve(path, refresh_s=0.3)
        driver = chromium(tmp_path)
        try:
            driver.get(server.url)
            _wait(lambda: driver.find_element("tag name", "body").get_attribute("data-trials") == "2")
            assert driver.title == "ecopt dashboard: demo <i>x</i>"  # shown as text
            _wait(lambda: driver.execute_script(
                "return document.querySelectorAll('#fig-front .main-svg').length > 0"))
            driver.execute_script("window.__loaded_once = 'yes'")
            # The study grows while the page is open: the writer holds the lock, the page reads.
            t = st.ask(params={"x": 0.4, "tag": XSS})
            st.tell(t, objective(t))
            _wait(lambda: driver.find_element("tag name", "body").get_attribute("data-trials") == "3")
            assert driver.execute_script("return window.__loaded_once") == "yes"  # no reload
            rows = driver.find_elements("css selector", "#trials-table tr")
            assert len(rows) == 1 + 3
            assert XSS in rows[1].text  # newest first, the markup shown as text
            assert driver.find_elements("css selector", "#trials img, #front-table img") == []
            assert driver.find_elements("css selector", "#trials-table b") == []
            assert driver.execute_script("return window.__xss") is None
            assert "estimated" in driver.find_element("id", "banner").text.lower()
            assert "live" in driver.find_element("id", "status").text
            # Later refreshes send changes only: a trial that pushes trial 1 off the front.
            t = st.ask(params={"x": 0.65, "tag": BOLD})
            st.tell(t, {"f1": 0.65, "f2": 0.15})
            _wait(lambda: driver.find_element("tag name", "body").get_attribute("data-trials") == "4")
            assert driver.execute_script("return window.__loaded_once") == "yes"
            assert [r.get_attribute("data-n") for r in
                    driver.find_elements("css selector", "#trials-table tbody tr")] == \
                ["3", "2", "1", "0"]
            assert driver.find_element("css selector", "#trial-1 td:nth-child(2)").text == "complete"
            drawn = driver.execute_script(
                "var d = document.getElementById('fig-front').data;"
                "return d.map(function (t) { return [t.uid, t.x.length]; });")
            assert dict(drawn) == {"complete": 4, "front": 3, "ref": 1}
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == []
        finally:
            driver.quit()
            server.stop()
