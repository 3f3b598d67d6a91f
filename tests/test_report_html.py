"""The HTML report: contents, escaping of crafted logs, no network requests."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import socket
import subprocess
import threading
from html.parser import HTMLParser

import pytest

import ecopt
from ecopt.report import build_report
from ecopt.report.html import CSP, render_html, write_report

pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "opt": ecopt.Categorical(["sgd", "adam"])})
OBJS = [ecopt.Objective("accuracy", "max"), ecopt.Objective("samples_per_joule", "max")]

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "div",
                "span", "b", "ul", "li", "table", "tr", "th", "td", "figure", "img",
                "figcaption", "details", "summary", "pre", "br"}


def objective(trial):
    if trial["x"] > 0.85:
        raise RuntimeError("diverged")
    with trial.phase("train"):
        sum(range(3000 + int(3000 * trial["x"])))
    trial.repeat_in_phase("inference", lambda: sum(range(2000)), samples_per_call=128)
    return {"accuracy": trial["x"], "samples_per_joule": trial.samples_per_joule("inference")}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "run"
    with ecopt.Study(SPACE, OBJS, storage=path, sampler="random", meter="estimate", seed=4) as s:
        s.optimize(objective, n_trials=10, show_progress=False)
    return path


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.style = ""
        self._in_style = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        else:
            self.text.append(data)


def parse(page: str) -> _Collect:
    p = _Collect()
    p.feed(page)
    return p


def assert_offline(page: str) -> None:
    """No element of the page can fetch anything: only data: images, no scripts or links."""
    p = parse(page)
    tags = {t for t, _ in p.tags}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    for tag, attrs in p.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for key in ("src", "href", "srcset", "action", "data", "poster", "background", "xlink:href"):
            v = attrs.get(key)
            if v is not None:
                assert v.startswith("data:image/png;base64,") or v.startswith("#"), (tag, key, v)
    assert "url(" not in p.style and "@import" not in p.style
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    metas = [a for t, a in p.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert metas and metas[0]["content"] == CSP and "default-src 'none'" in CSP


def test_report_contents_and_pngs(run, tmp_path):
    baseline = next(r.number for r in ecopt.load_study(run).records
                    if r.state.value == "complete")
    out, data = write_report(run, png_dir=tmp_path / "png", baseline=baseline)
    assert out == run / "report.html"  # the default place
    assert data.payback is not None and data.warnings == ()
    page = out.read_text(encoding="utf-8")
    assert_offline(page)
    assert 'id="estimate-banner"' in page and "ESTIMATED, not measured" in page
    table = page[page.index('id="front-table"'):]
    table = table[: table.index("</table>")]
    rows = re.findall(r'<tr class="front"><td>(\d+)', table)
    assert [int(n) for n in rows] == list(data.front)
    assert "cpu=estimate-cpu-time;ram=estimate-ram" in table
    assert 'id="payback-sentence"' in page
    assert ("recovered after" in page) == (data.payback.items_to_recover is not None)
    for n in (r.number for r in data.records):
        assert f"<td class=\"num\">{n}</td>" in page  # every trial in the trials table
    assert "diverged" in page  # failed trials' errors are shown
    imgs = [a["src"] for t, a in parse(page).tags if t == "img"]
    assert len(imgs) == 3
    sizes = {"pareto": (700, 500), "hypervolume": (1100, 420), "phase_energy": (1100, 420)}
    for name, size in sizes.items():
        with Image.open(tmp_path / "png" / f"{name}.png") as im:
            assert im.size == size
    # The embedded figures are the same PNGs.
    first = base64.b64decode(imgs[0].split(",", 1)[1])
    assert Image.open(io.BytesIO(first)).size == (700, 500)


def test_no_banner_when_every_joule_was_measured(run, tmp_path):
    dst = tmp_path / "m"
    dst.mkdir()
    (dst / "study.json").write_text((run / "study.json").read_text())
    lines = []
    for line in (run / "trials.jsonl").read_text().splitlines():
        d = json.loads(line)
        for ph in d["phases"].values():
            ph["measured"] = True
            ph["components"] = {"gpu:0": {"energy_j": ph["energy_j"],
                                          "source": "nvml-energy-counter", "measured": True}}
        if "search" in d["proposal"]:  # the proposals were metered by the same hardware
            d["proposal"]["search"].update(measured=True, source="gpu:0=nvml-energy-counter")
        lines.append(json.dumps(d))
    (dst / "trials.jsonl").write_text("\n".join(lines) + "\n")
    page = render_html(build_report(dst), {})
    assert "estimate-banner" not in page and "ESTIMATED" not in page
    assert "nvml-energy-counter" in page and "measured" in page


EVIL = "<script>alert('x')</script>"


def crafted_study(src, dst):
    """A copy of a real study whose every string is a markup injection attempt."""
    dst.mkdir()
    spec = json.loads((src / "study.json").read_text())
    spec["name"] = EVIL + "name"
    spec["space"] = {"<b onmouseover=alert(1)>p</b>": {"type": "categorical",
                                                          "choices": [EVIL + "cat", "ok"],
                                                          "ordered": False}}
    spec["objectives"][0]["name"] = "<img src=x onerror=alert(1)>"
    spec["host"]["cpu_model"] = "</td></table><script>alert('host')</script>"
    (dst / "study.json").write_text(json.dumps(spec))
    lines = []
    for line in (src / "trials.jsonl").read_text().splitlines():
        d = json.loads(line)
        d["params"] = {"<b onmouseover=alert(1)>p</b>": EVIL + "cat"}
        if d["values"]:
            d["values"]["<img src=x onerror=alert(1)>"] = d["values"].pop("accuracy")
            d["metrics"] = {EVIL + "metric": 1.0}
        d["phases"] = {f"<i>{k}</i>" if k == "train" else k: v for k, v in d["phases"].items()}
        for ph in d["phases"].values():
            for c in ph["components"].values():
                c["source"] = EVIL + "source"
                c["note"] = EVIL + "note"
        if d["error"]:
            d["error"] = {"type": "<Evil>", "message": EVIL + "message",
                          "traceback": "</pre></details>" + EVIL + "tb"}
        d["proposed_by"] = EVIL + "sampler"
        lines.append(json.dumps(d))
    (dst / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def test_crafted_log_cannot_inject_markup(run, tmp_path):
    dst = crafted_study(run, tmp_path / "evil")
    data = build_report(dst, baseline=next(r.number for r in ecopt.load_study(run).records
                                           if r.phases))
    assert any(r.error for r in data.records) and data.front
    page = render_html(data)
    assert "<script" not in page.lower()
    assert "<img src=x" not in page and "<b onmouseover" not in page and "<Evil>" not in page
    assert "<i>train</i>" not in page
    assert_offline(page)
    text = "".join(parse(page).text)
    for what in ("name", "cat", "metric", "source", "note", "message", "tb", "sampler"):
        assert EVIL + what in text, what  # shown, as text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;message" in page


def test_empty_and_failed_only_studies_still_render(tmp_path):
    with ecopt.Study(SPACE, OBJS, storage=tmp_path / "empty", sampler="random", meter="estimate"):
        pass
    out, data = write_report(tmp_path / "empty")
    page = out.read_text()
    assert "no finished trials" in page and 'id="warnings"' in page
    assert_offline(page)

    def boom(trial):
        raise ValueError("bad config <x>")

    with ecopt.Study(SPACE, OBJS, storage=tmp_path / "failed", sampler="random",
                     meter="estimate") as s:
        s.optimize(boom, n_trials=2, show_progress=False)
    out, data = write_report(tmp_path / "failed")
    page = out.read_text()
    assert "bad config &lt;x&gt;" in page and "no trial completed" in page
    assert "No Pareto front" in page
    assert_offline(page)


# -- optional: a real browser, with every request routed to a recording proxy ------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _RecordingProxy:
    """A TCP listener that records the first line of every connection (a proxy's view)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        self._stop = False
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.requests.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self._t.join(2)
        self.sock.close()


# Chromium's own background pings (clock, component updates, account check); a
# report's request would name any other host, and the static check above forbids all.
_BROWSER_OWN = re.compile(r"[ /.](google\.com|googleapis\.com|gvt1\.com)(:\d+)?[/ ]")


def _chromium_load(page_path, proxy_port, shot):
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--metrics-recording-only", "--disable-extensions",
         f"--proxy-server=http://127.0.0.1:{proxy_port}", "--proxy-bypass-list=<-loopback>",
         "--virtual-time-budget=3000", "--window-size=1200,1600", f"--screenshot={shot}",
         page_path.as_uri()],
        check=True, capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")
def test_page_loads_in_chromium_without_network_requests(run, tmp_path):
    out, data = write_report(run, tmp_path / "r.html")
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://example.invalid/x.png"></body></html>')
    proxy = _RecordingProxy()
    try:
        _chromium_load(control, proxy.port, tmp_path / "c.png")
        seen_control = list(proxy.requests)
        proxy.requests.clear()
        _chromium_load(out, proxy.port, tmp_path / "shot.png")
        seen_report = list(proxy.requests)
    finally:
        proxy.close()
    assert any("example.invalid" in r for r in seen_control), seen_control  # the check works
    assert [r for r in seen_report if not _BROWSER_OWN.search(r)] == []
    with Image.open(tmp_path / "shot.png") as im:
        assert im.size == (1200, 1600)
        lo, hi = im.convert("L").getextrema()
        assert hi - lo > 100  # something was drawn, not a blank page
