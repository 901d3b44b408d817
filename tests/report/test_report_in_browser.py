"""What a team sees, checked as a person would: a real pytest session with a failover cell,
a cell whose expectation is wrong and a cell whose rig breaks mid-run, its Allure 3 report
generated offline, and the matrix page, each opened in headless Chromium.

The checks read the generated report's data files (what the page renders), not pixels; the
screenshots are kept under reports/screenshots/ to be looked at. Needs Debian's `chromium`
and Allure 3 from npm (`npx -y allure@3.18.0 --version` caches it; or set CHAOS_ALLURE to
an `allure` command); skipped, saying which is missing, otherwise.
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import http.server
import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.expectations.ordering import PAID_FIRST
from chaos.report.merge import ALLURE2_HISTORY, AllureCli, find_allure, generate

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "reports" / "screenshots"
ALLURE_VERSION = "3.18.0"


def allure_command() -> list[str] | None:
    """CHAOS_ALLURE, else an `allure` 3 on PATH, else npx's cached allure@3.18.0 (no download)."""
    if os.environ.get("CHAOS_ALLURE"):
        return shlex.split(os.environ["CHAOS_ALLURE"])
    candidates = []
    if shutil.which("allure"):
        candidates.append(["allure"])
    if shutil.which("npx"):
        candidates.append(["npx", "--no-install", f"allure@{ALLURE_VERSION}"])
    for command in candidates:
        try:
            out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip().startswith("3."):
            return command
    return None


def allure2() -> AllureCli | None:
    """Allure 2 (npm allure-commandline, needs Java) when npx has it cached, else None."""
    if not (shutil.which("npx") and shutil.which("java")):
        return None
    cli, _ = find_allure("npx --no-install allure-commandline@2.46.1")
    return cli if cli is not None and cli.major == "2" else None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def tools(shared_once) -> tuple[list[str], str]:
    """Allure 3 (looked up once per session: each `--version` through npx starts node, ~1.4 CPU s)
    and Chromium."""
    browser = chromium()
    if browser is None:
        pytest.skip("Chromium is missing: apt-get install -y chromium")
    allure = shared_once("allure3-command", lambda _folder: allure_command())
    if allure is None:
        pytest.skip(f"Allure 3 is missing: run `npx -y allure@{ALLURE_VERSION} --version` once (caches it), "
                    "or set CHAOS_ALLURE to an allure 3 command")
    return allure, browser


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """The report over HTTP on 127.0.0.1 (Allure 3 fetches its data files; file:// cannot)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class Chromium:
    """One headless Chromium for every screenshot of a session, driven over the DevTools
    protocol on a pipe (``--remote-debugging-pipe``: no port, no websocket library). A launch
    costs ~2.4 CPU s (its zygote and renderers included), a page in a running browser ~0.3:
    seven launches, one a screenshot, cost 17 CPU s. Each page opens in a tab of its own
    (a fresh document, as a launch gave it) and gets the launch's 10 s virtual-time budget."""

    def __init__(self, binary: str, timeout: float = 120) -> None:
        self.timeout, self._buffer, self._id = timeout, b"", 0
        theirs_in, self._to_browser = os.pipe()     # the browser reads fd 3, writes fd 4
        self._from_browser, theirs_out = os.pipe()
        # above fd 10, so that placing them on 3 and 4 in the child never overwrites one with the other
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (theirs_in, theirs_out)]
        self.profile = tempfile.mkdtemp(prefix="chaos-chromium-")
        try:
            self.proc = subprocess.Popen(
                [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--remote-debugging-pipe", f"--user-data-dir={self.profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False,
                preexec_fn=lambda: (os.dup2(high[0], 3), os.dup2(high[1], 4)))
        finally:
            for fd in (theirs_in, theirs_out, *high):
                os.close(fd)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                with contextlib.suppress(Exception):
                    self.call("Browser.close", timeout=10)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_browser, self._from_browser):
                with contextlib.suppress(OSError):
                    os.close(fd)
            shutil.rmtree(self.profile, ignore_errors=True)

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self._from_browser], [], [], left)[0], "Chromium did not answer in time"
            chunk = os.read(self._from_browser, 1 << 16)
            assert chunk, f"Chromium closed its DevTools pipe (exit {self.proc.poll()})"
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, timeout: float | None = None, **params) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while (answer := self._message(deadline)).get("id") != self._id:
            pass
        assert "error" not in answer, f"{method}: {answer['error']}"
        return answer["result"]

    def _event(self, name: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not ((event := self._message(deadline)).get("method") == name and event.get("sessionId") == session):
            pass

    def screenshot(self, url: str, name: str, size: str = "1400,1000") -> Path:
        """`url` in a new tab of `size` (width,height), after 10 s of virtual time; the PNG kept
        under reports/screenshots/."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / name
        path.unlink(missing_ok=True)
        width, height = map(int, size.split(","))
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        try:
            tab = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Emulation.setDeviceMetricsOverride", tab, width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
            self.call("Emulation.setVirtualTimePolicy", tab, policy="pause")
            self.call("Page.navigate", tab, url=url)
            self.call("Emulation.setVirtualTimePolicy", tab, policy="pauseIfNetworkFetchesPending", budget=10_000)
            self._event("Emulation.virtualTimeBudgetExpired", tab)
            path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", tab, format="png")["data"]))
        finally:
            self.call("Target.closeTarget", targetId=target)
        assert path.read_bytes().startswith(b"\x89PNG"), f"no screenshot of {url}"
        return path


# The inner session, written as a team writes cell tests (README "What a test looks like"):
# the failover area's own s5 cell (one run), a cell judged by a deliberately wrong
# expectation (baseline reorders; the test says it must not; the race forced by the `hold`
# fault baseline's row runs under: unforced, a loaded machine let it keep its order), a plain
# unit test, and last a cell whose rig breaks: a throwaway fault that may take nothing down SIGKILLs the cluster's
# own proxy server mid-run.
INNER = textwrap.dedent('''
    import os
    import signal

    from chaos.expectations import Expectation
    from chaos.expectations.failover import preset_cell
    from chaos.expectations.ordering import PAID_FIRST
    from chaos.params import Param
    from faults.registry import FAULTS
    from faults.window import WindowFault

    def test_failover_cell(chaos_cell):
        chaos_cell(preset_cell("s5"), runs=1, fixed_runs=True)

    def test_a_plain_unit_test():
        assert Expectation.of(lost=0).bounds

    def test_wrong_expectation(chaos_cell):
        chaos_cell("baseline", PAID_FIRST, runs=1, expected=Expectation.of(wrong_final_state_runs=0,
                                                               note="deliberately wrong: baseline reorders"))

    class KillProxyServer(WindowFault):
        name, description = "test-kill-proxy-server", "SIGKILL the cluster's own proxy server mid-run"
        params = (Param("at_ms", 150, "when"), Param("duration_ms", 50, "window"))

        def start(self, ctx):
            [proxy] = [c for c in ctx.cluster.components() if c.kind == "proxy"]
            os.kill(proxy.pid, signal.SIGKILL)
            return {"killed": proxy.pid}

        def stop(self, ctx):
            return []

    def test_rig_broke(chaos_cell, monkeypatch):
        monkeypatch.setitem(FAULTS, KillProxyServer.name, f"{__name__}:KillProxyServer")
        chaos_cell("s1", KillProxyServer.name, runs=1, expected=Expectation.of(lost=0))
''')


@pytest.fixture(scope="module")
def report(tools, shared_once) -> dict:
    """Run the inner session, generate the Allure 3 report; the report's data files by test name.
    Once per session: xdist workers that get tests of this module share the one report."""
    allure, _ = tools

    def build(work: Path) -> dict:
        results, out = work / "allure-results", work / "allure-report"
        (work / "test_team_cells.py").write_text(INNER)
        env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        # At the failover cells' own time scale (chaos/expectations/failover.py TIME_SCALE: the row was
        # measured there); the baseline race is the hold's, the rig's break a fault's: what the report
        # shows is the same, the session half as long
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               f"--alluredir={results}", "--chaos-seed=11", "--chaos-time-scale=0.5",
                               "test_team_cells.py"],
                              cwd=work, env=env, capture_output=True, text=True, timeout=600)
        failover = [line for line in proc.stdout.splitlines() if line.startswith("FAILED") and "test_failover_cell" in line]
        if failover and "3 failed, 1 passed" in proc.stdout:
            # A loaded machine can keep the failover cell from its row: the report's checks could not
            # tell anything then, and suites/failover/test_failover.py::test_failover_cell[s5] fails for it.
            return {"skip": f"the inner failover cell left its row, nothing to show: {failover[0][:500]}"}
        assert "2 failed, 2 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
        gen = subprocess.run([*allure, "generate", "--config", str(REPO / "reports" / "allurerc.json"), "-o",
                              str(out), str(results)], capture_output=True, text=True, timeout=300, cwd=work)
        assert gen.returncode == 0, gen.stdout + gen.stderr
        return {"dir": str(out), "results": str(results)}

    built = shared_once("browser-report", build)
    if "skip" in built:
        pytest.skip(built["skip"])
    out = Path(built["dir"])
    tests = {}
    for path in (out / "data" / "test-results").glob("*.json"):
        data = json.loads(path.read_text())
        tests[data["fullName"].rpartition("#")[2].rpartition(".")[2]] = data
    return {"dir": out, "tests": tests, "results": Path(built["results"])}


def _attachments(node: dict) -> list[dict]:
    """Every attachment link in a test result or step, nested steps included."""
    found = [a["link"] for a in node.get("attachments") or [] if "link" in a]
    for step in node.get("steps") or []:
        if step.get("type") == "attachment" and "link" in step:
            found.append(step["link"])
        found += _attachments(step)
    return found


def report_views(tests: dict) -> list[tuple[str, str, str]]:
    """What a person opens in the report: (path after the report's URL, screenshot name, size)."""
    views = [("", "allure-overview.png", "1400,1000")]
    if "test_failover_cell" in tests:
        failover = tests["test_failover_cell"]
        views.append((f"#{failover['id']}", "allure-failover-cell.png", "1400,1800"))
        timeline = next((v for k, v in {a["name"]: a for a in _attachments(failover)}.items()
                         if k.endswith("timeline.png")), None)
        if timeline is not None:         # (test_failover_cell_... fails when there is none)
            views.append((f"data/attachments/{timeline['id']}{timeline['ext']}", "allure-failover-timeline.png",
                          "1250,600"))
    for test, name, size in (("test_wrong_expectation", "allure-failing-cell.png", "1400,1600"),
                             ("test_rig_broke", "allure-broken-cell.png", "1400,1100")):
        if test in tests:
            views.append((f"#{tests[test]['id']}", name, size))
    views.append(("#categories", "allure-categories.png", "1400,1000"))
    return views


@pytest.fixture(scope="module")
def shots(report, tools, shared_once) -> dict[str, Path]:
    """Every view of the report in one headless Chromium, once per session (the tests below
    check each its own): the screenshots by name."""
    _, browser = tools

    def build(_work: Path) -> dict[str, str]:
        with serve(report["dir"]) as url, Chromium(browser) as chromium:
            return {name: str(chromium.screenshot(url + where, name, size))
                    for where, name, size in report_views(report["tests"])}
    return {name: Path(path) for name, path in shared_once("browser-report-shots", build).items()}


def shown(shots: dict[str, Path], name: str) -> None:
    """The screenshot `name` was taken: a PNG image."""
    assert name in shots, f"no screenshot {name}: {sorted(shots)}"
    assert shots[name].read_bytes().startswith(b"\x89PNG"), name


def test_failover_cell_shows_labels_steps_cell_json_and_timeline(report, shots):
    test = report["tests"]["test_failover_cell"]
    labels = {(lab["name"], lab["value"]) for lab in test["labels"]}
    assert {("epic", "failover"), ("feature", "s5"), ("story", "promote-replica")} <= labels
    assert any(name == "severity" for name, _ in labels)
    params = {p["name"]: p for p in test["parameters"]}
    assert params["preset"]["value"] == "s5" and params["fault"]["value"].startswith("promote-replica:")
    assert params["part workload"]["value"].startswith("many-orders:") and params["seed"]["excluded"] is True
    runs = [s for s in test["steps"] if s.get("type") == "step" and s["name"].startswith("run 0")]
    assert runs, [s.get("name") for s in test["steps"]]
    assert runs[0]["status"] == "passed" and "lost" in runs[0]["name"]  # invalid, as its row says
    from chaos import run as orchestrator
    if hasattr(orchestrator, "Phase"):  # the orchestrator's phase clock records each phase
        names = [s["name"] for s in runs[0]["steps"] if s.get("type") == "step"]
        assert "workload" in names and any(n.startswith("fault:promote-replica") for n in names), names
    links = {a["name"]: a for a in _attachments(test)}
    assert "cell.json" in links and any(name.endswith("timeline.png") for name in links), list(links)
    assert any(name.endswith("trace.txt") for name in links) and any(name.endswith("history.txt") for name in links)
    cell = json.loads((report["dir"] / "data" / "attachments" / (links["cell.json"]["id"] + ".json")).read_text())
    assert cell["area"] == "failover" and cell["lost"] >= 1 and cell["matches_expectation"] is True
    timeline = next(v for k, v in links.items() if k.endswith("timeline.png"))
    png = report["dir"] / "data" / "attachments" / (timeline["id"] + timeline["ext"])
    assert png.read_bytes().startswith(b"\x89PNG")
    for name in ("allure-overview.png", "allure-failover-cell.png", "allure-failover-timeline.png"):
        shown(shots, name)


def test_failing_cell_lands_in_its_category(report, shots):
    test = report["tests"]["test_wrong_expectation"]
    assert test["status"] == "failed"
    assert "[WRONG_FINAL_STATE_RUNS: 1/1]" in test["error"]["message"]
    assert [c["name"] for c in test["categories"]] == ["Wrong final state"]
    tree = json.loads((report["dir"] / "widgets" / "categories.json").read_text())
    names = {node.get("name") for node in tree["nodes"].values()}
    assert "Wrong final state" in names
    env = {e["name"]: e["values"] for e in json.loads((report["dir"] / "widgets" / "allure_environment.json")
                                                      .read_text())}
    assert env["seed"] == ["11"] and env["redis.version"][0][0].isdigit()
    shown(shots, "allure-failing-cell.png")
    shown(shots, "allure-categories.png")


RIG_CATEGORY = next(c["name"] for c in json.loads((REPO / "reports" / "categories.json").read_text())
                    if c["name"].startswith("Unknown verdict: the rig broke"))


def test_a_cell_whose_rig_broke_is_broken_and_in_the_rig_category(report, shots):
    """Not failed (the strategy is not to blame): broken, the component named, in its category."""
    test = report["tests"]["test_rig_broke"]
    assert test["status"] == "broken", test["status"]
    assert test["error"]["message"].startswith("chaos.errors.RigFailure: RIG FAILURE: s1 x test-kill-proxy-server: "
                                               "run 0: proxy server (pid "), test["error"]["message"][:300]
    assert [c["name"] for c in test["categories"]] == [RIG_CATEGORY]
    assert "rig-failure" in {lab["value"] for lab in test["labels"] if lab["name"] == "tag"}
    text = test["descriptionHtml"]
    assert "<strong>the rig broke</strong>" in text and "matches its expectation" not in text, text
    assert "<strong>Rig broke</strong> (no strategy is to blame): run 0: proxy server (pid" in text, text
    assert any(a["name"] == "rig failures.txt" for a in _attachments(test))
    shown(shots, "allure-broken-cell.png")


def test_allure2_applies_the_same_categories_and_the_merge_carries_its_history(report, tmp_path):
    """Allure 2 reads categories.json and environment.properties that the plugin wrote. Generated
    through the nightly merge's own Allure 2 step (chaos.report.merge.generate) with a previous
    night's state: the merge hands the previous trend to Allure 2 and keeps the new one for the
    next night (the two real nights: tests/nightly/test_merge.py, nightly tier)."""
    cli = allure2()
    if cli is None:
        pytest.skip("Allure 2 is missing: java and `npx -y allure-commandline@2.46.1 --version` (caches it)")
    out, state = tmp_path / "night", tmp_path / "state"
    shutil.copytree(report["results"], out / "allure-results")
    previous = [{"data": {"failed": 0, "broken": 0, "skipped": 0, "passed": 3, "unknown": 0, "total": 3}}]
    (state / ALLURE2_HISTORY).mkdir(parents=True)          # a night before, as Allure 2 writes its trend
    (state / ALLURE2_HISTORY / "history-trend.json").write_text(json.dumps(previous))
    generated, why = generate(cli, out, state, "night 2")
    assert generated == out / "allure-report", why
    categories = json.loads((generated / "data" / "categories.json").read_text())["children"]
    def leaves(node: dict) -> list[str]:  # category > message > test
        return [name for child in node.get("children", []) for name in leaves(child)] or [node["name"]]
    assert {c["name"]: leaves(c) for c in categories} == {"Wrong final state": [f"baseline x {PAID_FIRST}"],
                                                          RIG_CATEGORY: ["s1 x test-kill-proxy-server"]}
    env = {e["name"]: e["values"] for e in json.loads((generated / "widgets" / "environment.json").read_text())}
    assert env["seed"] == ["11"] and env["redis.version"][0][0].isdigit()
    trend = json.loads((generated / "history" / "history-trend.json").read_text())
    assert [point["data"]["total"] for point in trend] == [4, 3], trend    # this night, then the one before
    assert json.loads((state / ALLURE2_HISTORY / "history-trend.json").read_text()) == trend


def test_matrix_page(tools, tmp_path):
    """The producer area's s1 rows (two of its four: the page is the same for any number),
    one run each: every cell judged, the coverage grid below. All four rows, judged, run in
    suites/producer/test_publish_blip.py."""
    _, browser = tools
    page = tmp_path / "matrix.html"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "chaos", "matrix", "--area", "producer", "--presets", "s1",
                           "--runs", "1", "--json", "--out", str(page), "--run-dir", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert len(doc["cells"]) == 2 and all(c["area"] == "producer" and c["expected"] for c in doc["cells"])
    html = page.read_text()
    assert '<h2 id="area-producer">' in html and '<h2 id="coverage">' in html
    assert html.count("<tr class=") == len(doc["cells"])
    with Chromium(browser) as chromium:
        shot = chromium.screenshot(page.as_uri(), "matrix-producer.png", "1400,1400")
    assert shot.stat().st_size > 10_000
