"""The HTML report (`remat report`, remat.report, REMAT_REPORT_DIR) in a real
headless browser, and the progress bars of the remat command.

Browser: Chromium from Debian, driven over the DevTools protocol
(websocket-client). The page must load with no console error or exception,
the search must filter the node table (typed, and from a #search= link),
headers must sort it, and every SVG must render with a non-empty box. A
screenshot of the run is written to the test's tmp dir (docs/report.png is
one such screenshot). Where Chromium is not installed the browser tests skip
and say so; tools/setup.sh installs it, so CI runs them.

Progress: `remat pareto` / `remat partition --progress always` draw a bar
("\\r... NN%") on stderr when it is a terminal (a pty here) and write
nothing of it when stderr is a pipe.
"""

from __future__ import annotations

import base64
import json
import os
import pty
import select
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import remat

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "transformer_block.json"
NO_CUT = ROOT / "tests" / "data" / "no_finite_cut.json"


def _remat_cli() -> str:
    exe = shutil.which("remat")
    if exe is None:
        pytest.fail("the remat command is not on PATH (pip install . installs it)")
    return exe


# --- the report itself ------------------------------------------------------------

def _report_html(tmp_path: Path) -> tuple[Path, int]:
    """A report with every section: torch's plans and frontier, the cut, the
    simulated memory timeline, and every node's reason (a traced partition)."""
    doc = EXAMPLE.read_bytes()
    result = remat.partition(doc, {"trace": True}, as_json=False)
    assert result["memory"]["timeline"]["forward"]
    nodes = len(json.loads(doc)["nodes"])
    html = remat.report(doc, result, plans=remat.plans(doc), pareto=remat.pareto(doc),
                        title="transformer_block")
    path = tmp_path / "report.html"
    path.write_text(html)
    return path, nodes


def test_cli_report_writes_a_self_contained_page(tmp_path):
    out, result = tmp_path / "r.html", tmp_path / "r.json"
    proc = subprocess.run([_remat_cli(), "report", str(EXAMPLE), "-o", str(out), "--json", str(result)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert 'class="plans"' in html and "this plan" in html  # torch's plans beside this one
    assert '"why":"' in result.read_text()  # the result says why, for each node
    assert json.loads(result.read_text())["format"] == "remat.partition_result"
    # No network: nothing is fetched from anywhere.
    for attr in ('src="http', "href=\"http", "<link", "@import"):
        assert attr not in html
    # A bad graph: an error naming it, and no file.
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    proc = subprocess.run([_remat_cli(), "report", str(bad), "-o", str(tmp_path / "x.html")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "remat: error:" in proc.stderr
    assert not (tmp_path / "x.html").exists()


def test_plans_are_torchs_budget_plans_built(tmp_path):
    doc = EXAMPLE.read_bytes()
    plans = remat.plans(doc, budgets=[0.5])
    assert plans[0]["label"] == "runtime-optimized"
    plain = remat.partition(doc, as_json=False)
    assert plans[0]["peak_bytes"] == plain["memory"]["peak_bytes"]
    assert plans[0]["saved_values"] == len(plain["saved_values"])
    assert plans[-1]["label"] == "inputs only"
    assert len({p["label"] for p in plans}) == len(plans)


def test_a_graph_without_a_valid_partition_gets_a_diagnosis_page(tmp_path):
    out = tmp_path / "nocut.html"
    proc = subprocess.run([_remat_cli(), "report", str(NO_CUT), "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "remat: error:" in proc.stderr
    assert f"wrote the diagnosis to {out}" in proc.stderr
    html = out.read_text()
    assert "no valid partition" in html and "Nodes involved in the conflict" in html


# --- Chromium over the DevTools protocol -------------------------------------------

def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; tools/setup.sh does)")


class _Page:
    """One page of a headless Chromium, with its console errors collected."""

    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    def send(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(e.get("method") == event for e in self.events):
                return
            self.ws.settimeout(max(0.1, deadline - time.time()))
            self.events.append(json.loads(self.ws.recv()))
        raise AssertionError(f"no {event} within {timeout}s")

    def eval(self, expression: str):
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(json.dumps(p.get("args"))[:500])
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", "")[:500])
        return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = _chromium()
    websocket = pytest.importorskip("websocket", reason="websocket-client is not installed "
                                                        "(tools/setup.sh installs it)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1280,900",
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.time() + 60
        while time.time() < deadline and port is None:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                pytest.fail(f"chromium exited with {proc.returncode}")
            if "DevTools listening on ws://" in line:
                port = int(line.split("ws://")[1].split("/")[0].split(":")[1])
        assert port, "chromium did not open its DevTools port"
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json").read())
        page_target = next(t for t in targets if t["type"] == "page")
        ws = websocket.create_connection(page_target["webSocketDebuggerUrl"], timeout=60,
                                         suppress_origin=True)
        yield _Page(ws)
        ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _open(page: _Page, url: str) -> None:
    page.events.clear()
    for domain in ("Page", "Runtime", "Log"):
        page.send(f"{domain}.enable")
    page.send("Page.navigate", url=url)
    page.wait_for("Page.loadEventFired")


ROWS = "document.querySelectorAll('#node-table tbody tr')"
NAMES = f"Array.from({ROWS}).map(tr => tr.cells[1].textContent)"


def test_report_in_a_browser(browser, tmp_path):
    path, nodes = _report_html(tmp_path)
    _open(browser, path.as_uri())
    assert browser.errors() == []
    assert browser.eval(f"{ROWS}.length") == nodes
    assert browser.eval("document.getElementById('count').textContent") == f"{nodes} of {nodes} nodes"

    # Search filters by name, case-insensitively; clearing it restores all rows.
    names = browser.eval(f"""(() => {{
        const s = document.getElementById('search');
        s.value = 'MM'; s.dispatchEvent(new Event('input'));
        return {NAMES}; }})()""")
    assert names and len(names) < nodes and all("mm" in n for n in names)
    browser.eval("(() => { const s = document.getElementById('search'); s.value = '';"
                 " s.dispatchEvent(new Event('input')); })()")
    assert browser.eval(f"{ROWS}.length") == nodes

    # Clicking "name" sorts by name; clicking again reverses.
    browser.eval("document.querySelector('th[data-col=\"1\"]').click()")
    names = browser.eval(NAMES)
    assert names == sorted(names)
    browser.eval("document.querySelector('th[data-col=\"1\"]').click()")
    assert browser.eval(NAMES) == sorted(names, reverse=True)

    # Every picture renders: the timeline, the frontier and (with graphviz) the cut.
    boxes = browser.eval("""Array.from(document.querySelectorAll('section svg'))
        .filter(s => !s.parentElement.closest('svg'))
        .map(s => { const r = s.getBoundingClientRect(); const b = s.getBBox();
                    return [s.closest('section').id, r.width, r.height, b.width, b.height]; })""")
    sections = [b[0] for b in boxes]
    assert {"memory", "pareto"} <= set(sections), boxes
    if shutil.which("dot"):
        assert "cut" in sections, boxes
    assert all(min(b[1:]) > 0 for b in boxes), boxes
    assert browser.eval("document.querySelectorAll('#memory circle.peak').length") == 1

    # The top of the page: summary, timeline, frontier, the cut, the table's start.
    shot = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": 1280, "height": 2400, "scale": 0.75})
    png = base64.b64decode(shot["data"])
    assert png.startswith(b"\x89PNG") and len(png) > 10000
    (tmp_path / "report.png").write_bytes(png)
    assert browser.errors() == []


# What a machine can judge of a layout: in every picture no text is cut off
# by its picture's edge and no two texts overlap; the page is no wider than
# the window (wide pictures scroll inside their frame); the timeline's peak
# label sits above the plot, where the line never goes.
LAYOUT_PROBLEMS = """(() => {
  const problems = [];
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 &&
                            Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  for (const svg of document.querySelectorAll('section svg')) {
    if (svg.parentElement.closest('svg')) continue;
    const box = svg.getBoundingClientRect();
    const where = svg.closest('section').id;
    const texts = Array.from(svg.querySelectorAll('text'))
        .map(t => [t.textContent, t.getBoundingClientRect(), t]).filter(([_, r]) => r.width > 0);
    for (const [t, r] of texts)
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
          r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        problems.push(where + ': cut off: ' + t);
    // The lines of one Graphviz label (its node's <g>) sit 1.1 font sizes
    // apart, and a shrunk drawing rounds their boxes up a pixel: labels,
    // not lines, must not overlap.
    const group = t => t.closest('g.node');
    for (let i = 0; i < texts.length; i++)
      for (let k = i + 1; k < texts.length; k++)
        if (!(group(texts[i][2]) && group(texts[i][2]) === group(texts[k][2])) &&
            overlap(texts[i][1], texts[k][1]))
          problems.push(where + ': overlap: ' + texts[i][0] + ' / ' + texts[k][0]);
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    problems.push('the page is wider than the window: ' + document.documentElement.scrollWidth);
  for (const label of document.querySelectorAll('svg.timeline text.peak-label')) {
    const frame = label.closest('svg').querySelector('rect[stroke]').getBoundingClientRect();
    if (label.getBoundingClientRect().bottom > frame.top + 0.5) problems.push('peak label inside the plot');
  }
  return problems;
})()"""

WHY = f"Array.from({ROWS}).map(tr => tr.cells[7].textContent)"


def test_report_layout_and_reasons_in_a_browser(browser, tmp_path):
    path, nodes = _report_html(tmp_path)
    _open(browser, path.as_uri())
    assert browser.errors() == []
    assert browser.eval(LAYOUT_PROBLEMS) == []
    # Every node says why, in words: no placeholder is left unfilled.
    reasons = browser.eval(WHY)
    assert len(reasons) == nodes and all(r and "{" not in r for r in reasons), reasons
    assert any("capacity" in r for r in reasons)
    # torch's plans are dots with tooltips; this partition's plan is marked once.
    assert browser.eval("document.querySelectorAll('svg.plans circle.plan').length") >= 3
    assert browser.eval("document.querySelectorAll('svg.plans circle.chosen').length") == 1
    assert browser.eval("document.querySelectorAll('#plans-table tr.chosen').length") == 1


# The layout faults a reader saw, each measured from the boxes Chromium lays
# out: a word of a table cell split across lines ("call_fun / ction": a
# cell's words may wrap only at spaces, '.', '_' and '/'), a picture wider
# than its frame (clipped on the right), and a chart's ticks that are not
# round (0.301, 0.401, ...: each tick a multiple of a step of 1, 2 or 5
# times a power of ten) or data that fills only part of its plot.
WORDS_PICTURES_TICKS = """(() => {
  const problems = [];
  const cells = document.querySelectorAll('#node-table td, #peak-groups td, #peak-table td, #plans-table td');
  for (const td of cells) {
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[A-Za-z0-9]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
        if (tops.size > 1) problems.push('word split: ' + m[0] + ' in ' + td.textContent.slice(0, 60));
      }
    }
  }
  for (const frame of document.querySelectorAll('.picture')) {
    const svg = frame.querySelector('svg');
    if (!svg) continue;
    const width = svg.getBoundingClientRect().width;
    if (width > frame.clientWidth + 1)
      problems.push('picture clipped: ' + frame.closest('section').id + ' ' + width + ' > ' + frame.clientWidth);
    if (frame.classList.contains('chart') && width < 0.9 * frame.clientWidth)
      problems.push('chart fills ' + Math.round(100 * width / frame.clientWidth) + '% of its frame');
  }
  for (const svg of document.querySelectorAll('svg')) {
    for (const axis of ['x-tick', 'y-tick']) {
      const values = Array.from(svg.querySelectorAll('text.' + axis))
          .map(t => parseFloat(t.textContent.replace(/,/g, '')));  // "200M", "1.5 MiB": the number
      if (values.length < 2) continue;
      const step = values[1] - values[0];
      const mantissa = step / Math.pow(10, Math.floor(Math.log10(step) + 1e-9));
      if (![1, 2, 5, 10].some(m => Math.abs(mantissa - m) < 1e-6))
        problems.push(axis + ' step not round: ' + values.join(' '));
      for (const v of values)
        if (Math.abs(v / step - Math.round(v / step)) > 1e-6)
          problems.push(axis + ' not a multiple of its step: ' + values.join(' '));
    }
    const plot = svg.querySelector('rect.plot');
    const marks = Array.from(svg.querySelectorAll('circle.plan, rect.remat-plan, circle.point'))
        .map(e => e.getBoundingClientRect());
    if (!plot || marks.length < 2) continue;
    const p = plot.getBoundingClientRect();
    const xs = marks.map(r => r.left + r.width / 2), ys = marks.map(r => r.top + r.height / 2);
    const spanX = Math.max(...xs) - Math.min(...xs), spanY = Math.max(...ys) - Math.min(...ys);
    if (spanX > 1 && spanX < 0.6 * p.width) problems.push('data fills ' + Math.round(100 * spanX / p.width) + '% of the plot width');
    if (spanY > 1 && spanY < 0.6 * p.height) problems.push('data fills ' + Math.round(100 * spanY / p.height) + '% of the plot height');
  }
  return problems;
})()"""


@pytest.mark.one_release
def test_no_word_split_no_picture_clipped_and_round_ticks_in_a_browser(browser, tmp_path):
    cli = _remat_cli()
    pages = []
    for budget in ("1", "0.3"):
        out = tmp_path / f"report_{budget}.html"
        proc = subprocess.run([cli, "report", str(EXAMPLE), "--memory-budget", budget, "-o", str(out)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        pages.append(out)
    for args in ([], ["--peak"]):
        out = tmp_path / f"pareto{len(args)}.svg"
        proc = subprocess.run([cli, "pareto", str(EXAMPLE), "-o", str(out), *args],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        # The chart framed as the report frames it (html.cc's .picture.chart
        # rule), for the layout checks.
        page = tmp_path / f"pareto{len(args)}.html"
        page.write_text('<!DOCTYPE html><html><head><style>.picture.chart { width: fit-content; }'
                        '</style></head><body><section id="chart"><div class="picture chart">'
                        f'{out.read_text()}</div></section></body></html>')
        pages.append(page)
    for page in pages:
        _open(browser, page.as_uri())
        assert browser.errors() == []
        assert browser.eval(WORDS_PICTURES_TICKS) == [], page.name
        assert browser.eval(LAYOUT_PROBLEMS) == [], page.name
    if shutil.which("dot"):
        _open(browser, pages[0].as_uri())
        assert browser.eval("document.querySelectorAll('#cut .picture svg').length") == 1


def test_a_big_graphs_report_stays_small_and_usable(browser, tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("synthetic", ROOT / "bench" / "synthetic.py")
    synthetic = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synthetic)
    graph, out = tmp_path / "big.json", tmp_path / "big.html"
    synthetic.main(["--nodes", "20000", "-o", str(graph)])
    nodes = len(json.loads(graph.read_text())["nodes"])
    proc = subprocess.run([_remat_cli(), "report", str(graph), "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # Bytes per node: what keeps a 100k-node report under 10 MB.
    assert out.stat().st_size / nodes < 100, out.stat().st_size
    _open(browser, out.as_uri())
    assert browser.errors() == []
    assert browser.eval(f"{ROWS}.length") == 2000  # the table renders its first rows only
    assert browser.eval("document.getElementById('count').textContent").startswith(
        f"{nodes} of {nodes} nodes (the first 2000 shown")
    assert browser.eval(LAYOUT_PROBLEMS) == []
    assert browser.eval(WORDS_PICTURES_TICKS) == []
    # What fills the peak: thousands of storages, told by group, the largest
    # group (by bytes) on the first line.
    groups = browser.eval("""Array.from(document.querySelectorAll('#peak-groups tbody tr'))
        .map(tr => [tr.cells[1].textContent, Number(tr.cells[3].textContent),
                    parseFloat(tr.cells[5].textContent) || 0])""")  # "<0.1%" reads 0
    assert groups and sum(g[1] for g in groups) > 1000, groups
    assert groups[0][2] == max(g[2] for g in groups), groups
    assert [g[2] for g in groups] == sorted((g[2] for g in groups), reverse=True), groups
    assert "smaller" not in browser.eval("document.getElementById('peak').textContent")


def test_the_diagnosis_page_in_a_browser(browser, tmp_path):
    out = tmp_path / "nocut.html"
    subprocess.run([_remat_cli(), "report", str(NO_CUT), "-o", str(out)], capture_output=True)
    _open(browser, out.as_uri())
    assert browser.errors() == []
    assert browser.eval(LAYOUT_PROBLEMS) == []
    if shutil.which("dot"):
        assert browser.eval("document.querySelectorAll('#conflict svg').length") == 1


def test_search_link_prefills_the_filter(browser, tmp_path):
    path, nodes = _report_html(tmp_path)
    _open(browser, path.as_uri() + "#search=addmm")
    names = browser.eval(NAMES)
    assert browser.eval("document.getElementById('search').value") == "addmm"
    assert 0 < len(names) < nodes and all("addmm" in n for n in names)
    assert browser.errors() == []


# --- progress bars ------------------------------------------------------------------

def _run_on_pty(args: list[str]) -> tuple[int, str]:
    """Runs args with stderr on a pseudo-terminal (stdout to a pipe)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.stdout.read()
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def test_pareto_draws_a_progress_bar_on_a_terminal_only(tmp_path):
    args = [_remat_cli(), "pareto", str(EXAMPLE), "-o", str(tmp_path / "f.svg")]
    rc, tty = _run_on_pty(args)
    assert rc == 0, tty
    assert "\rremat: pareto" in tty and "100%" in tty
    piped = subprocess.run(args, capture_output=True, text=True)
    assert piped.returncode == 0
    assert piped.stderr == "" and "\r" not in piped.stdout


def test_report_names_each_phase_on_a_terminal(tmp_path):
    args = [_remat_cli(), "report", str(EXAMPLE), "-o", str(tmp_path / "r.html")]
    rc, tty = _run_on_pty(args)
    assert rc == 0, tty
    for phase in ("load", "plans", "render", "write"):
        assert f"\rremat: {phase}" in tty, (phase, tty)
    piped = subprocess.run(args, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""


def test_partition_progress_follows_the_option(tmp_path):
    always = [_remat_cli(), "partition", str(EXAMPLE), "--progress", "always"]
    rc, tty = _run_on_pty(always)
    assert rc == 0 and "\rremat: partition" in tty and "100%" in tty
    # A small graph draws nothing by default, even on a terminal ...
    rc, tty = _run_on_pty([_remat_cli(), "partition", str(EXAMPLE)])
    assert rc == 0 and "\r" not in tty
    # ... and a pipe never gets a bar.
    piped = subprocess.run(always, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
    rc, tty = _run_on_pty([_remat_cli(), "pareto", str(EXAMPLE), "-o", str(tmp_path / "f.svg"),
                           "--progress", "never"])
    assert rc == 0 and "\r" not in tty
