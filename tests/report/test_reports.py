"""Reports of a real run against a local agent: JUnit (against an XSD), HTML (in headless Chromium), JSON,
GitHub annotations and job summary, `tamesu report` re-rendering, and `report:` in tamesu.yaml."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from cdp import Browser, chromium_binary
from conftest import run_tamesu
from report_fixtures import ReportAgent, only_run_dir, report_suite
from tamesu.net.serve import ThreadServer

XSD = Path(__file__).parents[1] / "fixtures" / "junit.xsd"


@dataclass
class ShopRun:
    folder: Path
    run_dir: Path
    process: subprocess.CompletedProcess[str]
    agent: ReportAgent
    summary_file: Path


@pytest.fixture(scope="module")
def shop_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShopRun]:
    """One run of the every-status suite with every report, as a GitHub job would run it."""
    folder = tmp_path_factory.mktemp("reports")
    agent = ReportAgent()
    server = ThreadServer(agent.app()).start()
    try:
        agent.leak_url = f"{server.url}/leak"
        report_suite(folder, server.url)
        summary_file = folder / "step-summary.md"
        process = run_tamesu(
            ["run", "shop.yaml", "--out", "out",
             "--report", "junit,html,json:reports/report.json,markdown:reports/summary.md,github"],
            cwd=folder, env={"GITHUB_STEP_SUMMARY": str(summary_file), "GITHUB_WORKSPACE": str(folder)})
        yield ShopRun(folder, only_run_dir(folder / "out"), process, agent, summary_file)
    finally:
        server.stop()


def test_the_run_exits_3_and_names_every_report(shop_run: ShopRun) -> None:
    out = shop_run.process.stdout
    assert shop_run.process.returncode == 3, out + shop_run.process.stderr  # the unreachable agent
    assert "4 passed, 1 failed, 1 quarantined, 1 error, 1 skipped" in out
    for line in ("junit report: ", "html report: ", "json report: reports/report.json",
                 "markdown report: reports/summary.md"):
        assert line in out
    # written as the run starts: the plan, with each test's file and line
    plan = json.loads((shop_run.run_dir / "plan.json").read_text())
    assert len(plan["tests"]) == 8 and all(t["file"].endswith("shop.yaml") and t["line"] > 1 for t in plan["tests"])


def test_junit_is_valid_and_maps_every_status(shop_run: ShopRun) -> None:
    import xmlschema  # in the two tests that use it: each xdist worker collects this module (0.13 s of CPU)

    path = shop_run.run_dir / "junit.xml"
    schema = xmlschema.XMLSchema(XSD)
    schema.validate(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == \
        {"tests": "8", "failures": "1", "errors": "1", "skipped": "2"}
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "shop" and suite.get("tests") == "8"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert sorted(cases) == ["flaky", "greets", "later", "lookups [one]", "lookups [two]", "refund", "repeated",
                             "unreachable"]
    assert all(case.get("classname") == "shop" for case in cases.values())

    for passed in ("greets", "lookups [one]", "lookups [two]"):
        assert [child.tag for child in cases[passed]] == [], passed
    # a repeated test carries its statistics as properties (issue 29)
    assert [child.tag for child in cases["repeated"]] == ["properties"]
    properties = {p.get("name"): p.get("value") for p in cases["repeated"].iter("property")}
    assert properties["tamesu.decided"] in ("pass", "fail", "undecided") and "tamesu.pass^1" in properties
    # before: tamesu.runs alone, the conclusive runs: a test run 4 times with 2 inconclusive said 2
    assert properties["tamesu.total_runs"] == "3" and properties["tamesu.runs"] == "3", properties
    assert "tamesu.inconclusive_runs" not in properties and "tamesu.error_runs" not in properties

    failure = cases["refund"].find("failure")
    assert failure is not None and failure.get("type") == "assertion"
    assert failure.get("message", "").startswith('contains: expected the agent to say "refund issued"')
    assert 'judge: rubric "The agent is polite": the agent refuses curtly (fake judge)' in (failure.text or "")
    assert "evidence: I can't do that." in (failure.text or "")
    system_out = cases["refund"].find("system-out")
    assert system_out is not None and "user: refund please" in (system_out.text or "")

    quarantined = cases["flaky"].find("skipped")
    assert quarantined is not None and cases["flaky"].find("failure") is None
    message = quarantined.get("message", "")
    assert message.startswith("quarantined (SUP-412 flaky): failed: contains:") and '"always"' in message

    skipped = cases["later"].find("skipped")
    assert skipped is not None and skipped.get("message") == "waiting for the billing API"

    error = cases["unreachable"].find("error")
    assert error is not None and "cannot reach" in error.get("message", "")
    assert cases["refund"].get("file", "").endswith("shop.yaml") and int(cases["refund"].get("line", "0")) > 1


class _Attributes(HTMLParser):
    """Every tag and attribute of a page, to check what could make a browser fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend((tag, name, value or "") for name, value in attrs)


def test_the_html_report_is_one_file_that_fetches_nothing(shop_run: ShopRun) -> None:
    """Static half of the promise (the browser half is the next test): nothing in the markup loads anything."""
    path = shop_run.run_dir / "report.html"
    html = path.read_text(encoding="utf-8")
    page = _Attributes()
    page.feed(html)
    assert "img" not in page.tags and "iframe" not in page.tags and "link" not in page.tags
    assert all(tag == "meta" or name not in ("src", "srcset", "action", "data") for tag, name, _ in page.attributes)
    links = [value for tag, name, value in page.attributes if name == "href"]
    assert links, "the report links its artifacts"
    for link in links:
        assert not urlparse(link).scheme and not link.startswith("//"), link
        if not link.startswith("#"):
            assert (path.parent / unquote(link)).exists(), link
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    # the agent's words are text, escaped, never markup
    assert '&lt;img src=&quot;http://127.0.0.1' in html


@pytest.mark.browser
@pytest.mark.skipif(chromium_binary() is None,
                    reason="no chromium binary: install Debian's chromium (apt-get install -y chromium)")
def test_the_html_report_renders_in_headless_chromium_without_network(shop_run: ShopRun, tmp_path: Path) -> None:
    report = shop_run.run_dir / "report.html"
    reason = next(a["reason"] for a in json.loads(
        (shop_run.run_dir / "shop" / "refund" / "run-1" / "result.json").read_text())["assertions"]
        if a["name"] == "contains")
    binary = chromium_binary()
    assert binary is not None
    browser = Browser(binary, tmp_path / "profile")
    try:
        page = browser.open_page(390, 844, mobile=True)  # a phone
        browser.call("Page.navigate", {"url": report.as_uri()}, page)
        browser.wait_for("Page.loadEventFired")
        text = browser.evaluate(page, "document.body.innerText")
        assert reason in text  # the failing assertion's reason, as the agent's words were
        assert "the agent refuses curtly" in text and "I can't do that." in text  # the judge and its evidence
        assert "quarantined: SUP-412 flaky" in text and "waiting for the billing API" in text
        assert browser.evaluate(page, "document.querySelectorAll('details.test').length") == 8
        assert browser.evaluate(page, "document.querySelectorAll('img').length") == 0
        assert browser.evaluate(page, "document.querySelectorAll('.chat .msg').length") > 8
        assert browser.evaluate(page, "document.querySelectorAll('svg.chart').length") > 8
        # the script ran: the filter shows the one failed test
        assert browser.evaluate(page, "document.documentElement.classList.contains('js')") is True
        browser.evaluate(page, "document.querySelector('[data-filter=failed]').click()")
        assert browser.evaluate(
            page, "[...document.querySelectorAll('details.test')].filter(d => !d.hidden).map(d => d.id)") == \
            ["t-shop-refund"]
        # readable on a phone: nothing wider than the screen
        assert browser.evaluate(page, "document.documentElement.scrollWidth <= window.innerWidth") is True
        # printable
        assert browser.pdf(page)[:5] == b"%PDF-"
        assert browser.console_errors() == []
        # no network: the only request the page made was for the file itself
        assert set(browser.requested_urls()) == {report.as_uri()}
    finally:
        browser.close()
    assert shop_run.agent.leaks == []


def test_the_json_report_holds_every_test_and_run(shop_run: ShopRun) -> None:
    data = json.loads((shop_run.folder / "reports" / "report.json").read_text())
    assert data["kind"] == "tamesu.report" and data["schema_version"] == 1
    assert data["summary"]["counts"] == {"passed": 4, "failed": 1, "error": 1, "quarantined": 1, "skipped": 1,
                                         "total": 8}
    tests = {t["id"]: t for t in data["tests"]}
    refund = tests["shop/refund"]
    assert refund["status"] == "failed" and refund["file"].endswith("shop.yaml")
    [run] = refund["runs"]
    assert [(a["name"], a["passed"]) for a in run["assertions"]] == [("contains", False), ("judge", False)]
    assert run["assertions"][1]["evidence"] == ["I can't do that."] and run["assertions"][1]["fake"] is True
    assert [line["role"] for line in run["transcript"]] == ["user", "agent"]
    assert len(tests["shop/repeated"]["runs"]) == 3
    assert tests["shop/greets"]["runs"][0]["tool_calls"][0]["name"] == "lookup"
    assert tests["shop/flaky"]["quarantine"] == "SUP-412 flaky"


def test_github_annotations_point_at_the_suite_and_write_the_job_summary(shop_run: ShopRun) -> None:
    lines = [line for line in shop_run.process.stdout.splitlines() if line.startswith("::")]
    by_title = {line.split("title=")[1].split("::")[0]: line for line in lines if "title=" in line}
    assert set(by_title) == {"FAIL shop/refund", "QUAR shop/flaky", "ERR shop/unreachable", "tamesu"}
    failed = by_title["FAIL shop/refund"]
    assert failed.startswith("::error file=shop.yaml,line=")
    line = int(failed.split("line=")[1].split(",")[0])
    suite_lines = (shop_run.folder / "shop.yaml").read_text().splitlines()
    assert any('"refund"' in text for text in suite_lines[line - 1:line + 1])
    assert '%0Ajudge: rubric "The agent is polite": the agent refuses curtly' in failed and "\n" not in failed
    assert by_title["QUAR shop/flaky"].startswith("::warning ")
    assert "quarantined (SUP-412 flaky), not failing the run" in by_title["QUAR shop/flaky"]
    assert by_title["ERR shop/unreachable"].startswith("::error ")
    assert by_title["tamesu"].startswith("::notice ")
    summary = shop_run.summary_file.read_text()
    assert summary.startswith("### ❌ tamesu: 4 passed, 1 failed, 1 error, 1 quarantined, 1 skipped")
    assert "#### 🟡 Quarantined (not failing the run)" in summary and "`shop/flaky`" in summary
    assert "| `shop/refund` | 0/1 | contains: expected the agent to say" in summary
    assert (shop_run.folder / "reports" / "summary.md").read_text() == summary.rstrip("\n") + "\n"


def test_tamesu_report_renders_the_same_files_again(shop_run: ShopRun, tmp_path: Path) -> None:
    run_dir = shop_run.run_dir
    again = run_tamesu(["report", str(run_dir), "--report",
                        f"junit:{run_dir}/again.xml,html:{run_dir}/again.html,json:{tmp_path}/r.json"],
                       cwd=shop_run.folder)
    # the run's own code (its agent was unreachable): a report of it is not a green CI step
    assert again.returncode == shop_run.process.returncode == 3, again.stdout + again.stderr
    assert (run_dir / "again.xml").read_bytes() == (run_dir / "junit.xml").read_bytes()
    assert (run_dir / "again.html").read_text() == (run_dir / "report.html").read_text()
    assert json.loads((tmp_path / "r.json").read_text())["tests"] == \
        json.loads((shop_run.folder / "reports" / "report.json").read_text())["tests"]
    # no report named: the console summary, as `run` printed it
    summary = run_tamesu(["report", str(run_dir)], cwd=shop_run.folder)
    assert summary.returncode == 3
    assert "FAIL  shop/refund" in summary.stdout and "QUAR  shop/flaky" in summary.stdout
    assert "4 passed, 1 failed, 1 quarantined, 1 error, 1 skipped" in summary.stdout
    # `-`: standard output, the report alone (it was a file named `-` in the current folder)
    piped = run_tamesu(["report", str(run_dir), "--report", "json:-"], cwd=shop_run.folder)
    assert piped.returncode == 3 and json.loads(piped.stdout)["tests"] == \
        json.loads((shop_run.folder / "reports" / "report.json").read_text())["tests"]
    markdown = run_tamesu(["report", str(run_dir), "--report", "markdown:-"], cwd=shop_run.folder)
    assert markdown.stdout.startswith("### ❌ tamesu: 4 passed, 1 failed"), markdown.stdout
    assert not (shop_run.folder / "-").exists() and not list(run_dir.glob(".*-report.tmp"))
    bad = run_tamesu(["report", str(run_dir), "--report", "pdf"], cwd=shop_run.folder)
    assert bad.returncode == 2 and "unknown report 'pdf'" in bad.stderr


def test_a_killed_run_still_reports_what_finished_and_what_did_not(shop_run: ShopRun, tmp_path: Path) -> None:
    import xmlschema

    killed = tmp_path / "killed"
    shutil.copytree(shop_run.run_dir, killed)
    (killed / "run.json").unlink()
    lines = (killed / "results.jsonl").read_text().splitlines()
    (killed / "results.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # a torn last line
    result = run_tamesu(["report", str(killed), "--report", "junit:k.xml,html:k.html"], cwd=tmp_path)
    assert result.returncode != 0, result.stderr  # a killed run never passes
    assert "5 of 8 planned tests did not finish (the run did not finish (no run.json))" in result.stderr
    assert "unreadable result" in result.stdout
    xmlschema.XMLSchema(XSD).validate(str(tmp_path / "k.xml"))
    root = ET.parse(tmp_path / "k.xml").getroot()
    assert root.get("tests") == "8"  # three finished, five never did: listed as skipped
    not_run = [c for c in root.iter("testcase") if (s := c.find("skipped")) is not None
               and "did not finish" in (s.get("message") or "")]
    assert len(not_run) == 5
    assert "Not finished" in (tmp_path / "k.html").read_text()


def test_reports_set_in_tamesu_yaml(tmp_path: Path, tamesu, serve) -> None:
    agent = ReportAgent()
    server = serve(agent.app())
    suite = tmp_path / "checks.tamesu.yaml"
    suite.write_text(f"""\
targets:
  bot: {{ type: rest, url: "{server.url}/chat", response: {{ text: $.text }} }}
tests:
  - name: says hello
    target: bot
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ contains: hello }} ]
""")
    (tmp_path / "tamesu.yaml").write_text('report: ["junit:reports/{run}.xml", html]\n')
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    result = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=sub)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = only_run_dir(tmp_path / "out")
    # relative to tamesu.yaml, not to where the command ran; {run} is the run directory's name
    assert (tmp_path / "reports" / f"{run_dir.name}.xml").is_file()
    assert (run_dir / "report.html").is_file()
    # --report replaces the project's list
    result = tamesu(["run", str(suite), "--out", str(tmp_path / "out2"), "--report", "json"], cwd=sub)
    run_dir = only_run_dir(tmp_path / "out2")
    assert (run_dir / "report.json").is_file() and not (run_dir / "report.html").exists()

    (tmp_path / "tamesu.yaml").write_text("report: [junit, pdf]\n")
    bad = tamesu(["validate", str(suite)], cwd=tmp_path)
    assert bad.returncode == 2
    assert "tamesu.yaml:1:" in bad.stderr and "unknown report 'pdf'" in bad.stderr


def test_html_anchors_are_one_per_test_and_inconclusive_has_a_filter() -> None:
    # `a b` and `a-b` shared `t-s-a-b`: a regression's link jumped to the other test; inconclusive tests were
    # hidden under every filter but "all"
    from types import SimpleNamespace

    from tamesu.report.html import _Page

    results = [SimpleNamespace(id=i) for i in ("s/a b", "s/a-b", "s/refund")]
    page = _Page(SimpleNamespace(results=results, dir=Path(".")), Path("."), None)  # type: ignore[arg-type]
    first, second = page.anchor("s/a b"), page.anchor("s/a-b")
    assert first != second and first.startswith("t-s-a-b-") and second.startswith("t-s-a-b-")
    assert page.anchor("s/refund") == "t-s-refund"  # alone: as readable as before
    assert 'data-filter="inconclusive"' in page.controls()
