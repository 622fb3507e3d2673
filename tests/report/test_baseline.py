"""`--baseline`: a second run compared with the first, through the real command against a local agent."""

from __future__ import annotations

import json
from pathlib import Path

from report_fixtures import ReportAgent


def _suite(path: Path, url: str, tests: list[dict]) -> None:
    suite = {"name": "shop", "targets": {"bot": {"type": "rest", "url": f"{url}/chat",
                                                 "response": {"text": "$.text", "tool_calls": "$.tool_calls"}}},
             "tests": tests}
    path.write_text(json.dumps(suite, indent=2), encoding="utf-8")


def _test(name: str, expect: str, turns: int = 1, **extra: object) -> dict:
    return {"name": name, "target": "bot", "scenario": {"script": [{"say": "hello"}] * turns},
            "assert": [{"contains": expect}], **extra}


def test_a_regression_a_fix_and_a_quarantined_failure(tmp_path: Path, tamesu, serve) -> None:
    server = serve(ReportAgent().app())
    suite = tmp_path / "shop.yaml"
    _suite(suite, server.url, [
        _test("steady", "hello"),
        _test("regresses", "hello"),
        _test("gets fixed", "goodbye"),
        _test("flaky", "hello"),
        _test("longer", "hello"),
        _test("gone", "hello"),
    ])
    first = tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr  # "gets fixed" fails at first
    [before] = [d for d in (tmp_path / "out").iterdir() if d.is_dir()]

    _suite(suite, server.url, [
        _test("steady", "hello"),
        _test("regresses", "goodbye"),
        _test("gets fixed", "hello"),
        _test("flaky", "goodbye", quarantine={"reason": "SUP-412 flaky"}),
        _test("longer", "hello", turns=3),
        _test("fresh", "hello"),
    ])
    # the folder of runs: its newest run other than this one is the baseline
    second = tamesu(["run", "shop.yaml", "--out", "out", "--baseline", "out", "--report", "json,markdown,html"],
                    cwd=tmp_path)
    assert second.returncode == 1, second.stdout + second.stderr  # the regression fails the run, nothing else
    out = second.stdout
    assert f"compared with {before.name}: 1 regression, 1 fix, 1 quarantined, 1 new, 1 removed" in out
    assert "regression  shop/regresses: was passed, now failed: contains:" in out
    assert "fixed       shop/gets fixed: was failed" in out
    assert "quarantined shop/flaky: was passed (not a regression)" in out

    [after] = [d for d in (tmp_path / "out").iterdir() if d.is_dir() and d != before]
    kept = json.loads((after / "baseline.json").read_text())
    assert kept["baseline"] == before.name
    assert [c["id"] for c in kept["regressions"]] == ["shop/regresses"]
    assert [c["id"] for c in kept["fixes"]] == ["shop/gets fixed"]
    assert [(c["id"], c["before"], c["now"]) for c in kept["quarantined"]] == [("shop/flaky", "passed", "quarantined")]
    assert kept["new"] == ["shop/fresh"] and kept["removed"] == ["shop/gone"]
    turns = [m for m in kept["metric_changes"] if m["id"] == "shop/longer" and m["metric"] == "turns"]
    assert turns == [{"id": "shop/longer", "metric": "turns", "before": 1.0, "now": 3.0, "change": 2.0}]
    # an unchanged count is no change, whatever the tolerance
    assert not [m for m in kept["metric_changes"] if m["metric"] == "turns" and m["id"] != "shop/longer"]

    report = json.loads((after / "report.json").read_text())
    assert [c["id"] for c in report["baseline"]["regressions"]] == ["shop/regresses"]
    summary = (after / "summary.md").read_text()
    assert "- ❌ regression `shop/regresses`" in summary and "- 🟡 quarantined `shop/flaky`" in summary
    assert f"Compared with {before.name}" in (after / "report.html").read_text()

    # the comparison is kept: `tamesu report` shows it again without naming the baseline
    again = tamesu(["report", str(after), "--report", "markdown:again.md"], cwd=tmp_path)
    assert again.returncode == 1, again.stderr  # the run's own code: it has a regression
    assert (tmp_path / "again.md").read_text() == summary

    # a tolerance wide enough hides the turns change; statuses are compared all the same
    wide = tamesu(["report", str(after), "--baseline", str(before), "--tolerance", "5", "--report", "json:w.json"],
                  cwd=tmp_path)
    assert wide.returncode == 1, wide.stderr
    changes = json.loads((tmp_path / "w.json").read_text())["baseline"]
    assert not [m for m in changes["metric_changes"] if m["metric"] == "turns"]
    assert [c["id"] for c in changes["regressions"]] == ["shop/regresses"]


def test_no_earlier_run_is_a_warning_not_a_failure(tmp_path: Path, tamesu, serve) -> None:
    server = serve(ReportAgent().app())
    _suite(tmp_path / "shop.yaml", server.url, [_test("steady", "hello")])
    (tmp_path / "runs").mkdir()
    result = tamesu(["run", "shop.yaml", "--out", "runs", "--baseline", "runs"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: baseline:" in result.stdout and "holds no earlier run" in result.stdout
    first_ever = tamesu(["run", "shop.yaml", "--out", "runs", "--baseline", "no-such-folder"], cwd=tmp_path)
    assert first_ever.returncode == 0 and "warning: baseline: no-such-folder" in first_ever.stdout
    # a run compared with itself: before, "not a run directory (no results.jsonl)", of a folder that has one
    run_dir = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())[0]
    itself = tamesu(["report", str(run_dir), "--baseline", str(run_dir)], cwd=tmp_path)
    assert "is this run itself: name an earlier run, or the folder of runs" in itself.stdout + itself.stderr


def test_metric_changes_leave_out_jitter_and_repeats_and_say_what_was_cut() -> None:
    # before: a fast agent's 1.9 ms -> 7.3 ms read "+283%", once for the plain name and again for _max, _p50 and
    # _p95; 60 changes were cut to 20 (console) and 50 (Markdown) without a word; 📈 marked a fall too
    from tamesu.report.baseline import compare, console_lines
    from tamesu.report.load import LoadedRun, PlanRecord
    from tamesu.report.markdown import LIMIT
    from tamesu.results.records import RunSummary, RunSummaryFile, TestResult

    def run(name: str, metrics: dict[str, dict[str, float]]) -> LoadedRun:
        results = [TestResult(suite="s", test=test, id=f"s/{test}", target="bot", status="passed",
                              runs=[RunSummary(run=1, status="passed", dir="x", metrics=values)])
                   for test, values in metrics.items()]
        summary = RunSummaryFile(tamesu_version="?", started_at="", finished_at="", duration_ms=0.0, exit_code=0,
                                 counts={"passed": len(results)})
        return LoadedRun(dir=Path(name), summary=summary, results=results, plan=PlanRecord())

    jitter = {"turn_latency_ms": 1.9, "turn_latency_ms_max": 1.9, "turn_latency_ms_p50": 1.9}
    slower = {"turn_latency_ms": 900.0, "turn_latency_ms_max": 900.0, "turn_latency_ms_p95": 900.0}
    before = run("a", {"fast": jitter, "slow": {**slower, "turns": 4.0},
                       **{f"t{i}": {"turns": 2.0} for i in range(LIMIT + 5)}})
    after = run("b", {"fast": {k: 7.3 for k in jitter}, "slow": {k: 1800.0 for k in slower} | {"turns": 2.0},
                      **{f"t{i}": {"turns": 3.0} for i in range(LIMIT + 5)}})
    changes = compare(after, before).metric_changes
    named = {(m.id, m.metric) for m in changes}
    assert not any(test == "s/fast" for test, _ in named), named  # 5 ms of a fast agent
    # one turn's p95 is its plain value: said by the plain name's line
    assert {metric for test, metric in named if test == "s/slow"} == {"turn_latency_ms", "turns"}
    lines = [line for _style, line in console_lines(compare(after, before))]
    assert lines[-1] == f"  ... and {len(changes) - 20} more (all of them in baseline.json)", lines
    from tamesu.report.markdown import render_markdown

    text = render_markdown(after, compare(after, before))
    assert "- 📉 `s/slow` turns 4 -> 2 (-50%)" in text and "- 📈 `s/slow` turn_latency_ms 900 -> 1800 (+100%)" in text
    assert f"- ... and {len(changes) - LIMIT} more (all of them in baseline.json)" in text


def test_a_test_gone_inconclusive_is_listed_and_an_errored_run_moves_no_metric(tmp_path: Path, tamesu,
                                                                               serve) -> None:
    # before: a test that went from passed to inconclusive was no change at all, and a run that errored (it
    # graded nothing) read as "metric change turns 1 -> 0 (-100%)"
    import itertools

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    answers = itertools.chain(["Your flight is booked."] * 2, itertools.repeat("Sorry, no."))

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": next(answers)})

    flights = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    echo = serve(ReportAgent().app()).url
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['shop.yaml']\ncache: { mode: off }\nmodels:\n"
        "  simulator: { provider: fake, rules: [ { say: \"As an AI language model, I can't book flights\" } ] }\n")
    (tmp_path / "shop.yaml").write_text(f"""
name: shop
targets:
  flights: {{ type: rest, url: "{flights}/chat" }}
  echo: {{ type: rest, url: "{{{{env.ECHO}}}}/chat", response: {{ text: $.text }} }}
tests:
  - name: spoiled
    target: flights
    retries_inconclusive: 0
    scenario: {{ goal: "Book a flight to Paris", max_turns: 2 }}
    assert: [ {{ contains: booked }} ]
  - name: errored
    target: echo
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ contains: hello }} ]
""")
    first = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"ECHO": echo})
    assert first.returncode == 0, first.stdout + first.stderr
    # the echo agent is away: a connection refused is the environment's error
    second = tamesu(["run", "--out", "out", "--baseline", "out", "--report", "json"], cwd=tmp_path,
                    env={"ECHO": "http://127.0.0.1:9"})
    assert second.returncode == 3, second.stdout + second.stderr
    out = second.stdout
    assert "regression  shop/spoiled: was passed, now inconclusive: the simulated user broke character" in out, out
    assert "regression  shop/errored: was passed, now error:" in out, out
    # the inconclusive test's latency may move on a loaded machine: only the errored test must move nothing
    assert "metric      shop/errored" not in out, out
    run_dir = max(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    comparison = json.loads((run_dir / "baseline.json").read_text())
    assert [m for m in comparison["metric_changes"] if m["id"] == "shop/errored"] == [], comparison
    assert {r["id"] for r in comparison["regressions"]} == {"shop/spoiled", "shop/errored"}, comparison


def test_a_test_skipped_now_or_no_longer_skipped_is_listed(tmp_path: Path, tamesu, serve) -> None:
    # before: a passing test skipped in the next run, and a skipped test that ran and failed, were in no list:
    # "0 regressions, 0 fixes, 0 new, 0 removed", and the first left the run green
    server = serve(ReportAgent().app())
    suite = tmp_path / "shop.yaml"
    _suite(suite, server.url, [_test("hidden", "hello"), _test("unskipped", "goodbye", skip="SUP-7 not built yet")])
    first = tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    _suite(suite, server.url, [_test("hidden", "hello", skip="SUP-9 flaky on CI"), _test("unskipped", "goodbye")])
    second = tamesu(["run", "shop.yaml", "--out", "out", "--baseline", "out", "--report", "markdown,html"],
                    cwd=tmp_path)
    assert second.returncode == 1, second.stdout + second.stderr  # the test that runs now fails
    out = second.stdout
    assert "0 regressions, 0 fixes, 1 skipped now, 1 new, 0 removed, 0 metric changes" in out, out
    assert "skipped     shop/hidden: was passed, skipped now: SUP-9 flaky on CI" in out
    assert "new         shop/unskipped" in out
    after = max(d for d in (tmp_path / "out").iterdir() if d.is_dir())
    kept = json.loads((after / "baseline.json").read_text())
    assert [(c["id"], c["before"], c["now"], c["reason"]) for c in kept["skipped"]] == [
        ("shop/hidden", "passed", "skipped", "SUP-9 flaky on CI")]
    assert kept["new"] == ["shop/unskipped"] and kept["regressions"] == []
    assert "- ⏭️ skipped now `shop/hidden` (was passed): SUP-9 flaky on CI" in (after / "summary.md").read_text()
    assert "skipped now shop/hidden: was passed: SUP-9 flaky on CI" in (after / "report.html").read_text()


def test_a_comparison_that_cannot_be_kept_is_still_shown_and_reported(tmp_path: Path, tamesu, serve) -> None:
    # before: "tamesu: internal error: IsADirectoryError", exit 3, no report, when baseline.json could not be
    # written into the run folder (another user's, a read-only copy; as root, a folder in the way stands for it)
    server = serve(ReportAgent().app())
    _suite(tmp_path / "shop.yaml", server.url, [_test("steady", "hello")])
    for _ in range(2):
        assert tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path).returncode == 0
    before, after = sorted(d for d in (tmp_path / "out").iterdir() if d.is_dir())
    (after / "baseline.json.tmp").mkdir()
    again = tamesu(["report", str(after), "--baseline", str(before), "--report", "markdown:again.md"], cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"compared with {before.name}: 0 regressions" in again.stdout
    assert f"warning: baseline: cannot keep the comparison as {after}/baseline.json: " in again.stdout, again.stdout
    assert f"#### Compared with `{before.name}`" in (tmp_path / "again.md").read_text()
    assert not (after / "baseline.json").exists()
