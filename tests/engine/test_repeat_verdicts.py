"""A repeated test's verdict when some of its runs say nothing of the agent: runs the simulated user spoiled
(inconclusive) and runs the environment broke (errors) count neither way, and a test they leave too few runs to
decide is not decided by the runs that remain (docs/repeats.md, "Runs that say nothing")."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _agent(pattern: str) -> Starlette:
    """Answers each request by the next letter of `pattern` (cycling): P "booked", F "sorry" (a run of two turns
    takes two letters)."""
    letters = itertools.cycle(pattern)

    async def chat(request: Request) -> JSONResponse:
        letter = next(letters)
        return JSONResponse({"text": "Your flight is booked." if letter == "P" else "Sorry, no."})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _results(tmp_path: Path) -> dict[str, dict[str, Any]]:
    [run_dir] = list((tmp_path / "out").iterdir())
    return {json.loads(x)["test"]: json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()}


SPOILED = """\
targets:
  agent: {{ type: rest, url: "{url}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 4
    pass_threshold: {threshold}
    retries_inconclusive: 0
    scenario: {{ goal: "Book a flight to Paris", max_turns: 2 }}
    assert: [ {{ contains: "booked" }} ]
"""


def _spoiling_project(tmp_path: Path, url: str, threshold: float) -> None:
    # the simulated user breaks character on every run: a run the agent fails is inconclusive, one it passes passes
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        "  simulator: { provider: fake, rules: [ { say: \"As an AI language model, I can't book flights\" } ] }\n")
    (tmp_path / "suite.yaml").write_text(SPOILED.format(url=url, threshold=threshold))


def test_one_conclusive_run_of_four_does_not_decide_a_test_at_half(tmp_path: Path, tamesu: Any,
                                                                   serve: Any) -> None:
    # before: PASS, exit 0, "1/4 runs passed" and stats.runs 1: three runs the simulated user spoiled left one
    # run to stand for four, and nothing said three were inconclusive
    _spoiling_project(tmp_path, serve(_agent("PPFFFFFF")).url, 0.5)
    result = tamesu(["run", "--out", "out", "--report", "json:report.json,github"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "INC   suite/book  1/4 runs passed, 3 inconclusive" in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert line["status"] == "inconclusive" and line["stats"]["runs"] == 1, line
    assert line["reason"].startswith("3 of 4 runs inconclusive, too many to decide: 1 passed, pass_threshold 0.5 "
                                     "needs 2 of 4"), line["reason"]
    report = json.loads((tmp_path / "report.json").read_text())
    [test] = report["tests"]
    assert (test["status"], test["inconclusive_runs"]) == ("inconclusive", 3), test
    # before, the annotation said the simulated user "spoiled every run" of a test one of whose runs passed
    [annotation] = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert "title=INC suite/book::inconclusive: the simulated user, not the agent, spoiled 3 of 4 runs, too many " \
           "to decide:%0A1/4 runs passed, 3 inconclusive" in annotation, annotation


def test_enough_conclusive_runs_decide_and_the_inconclusive_ones_are_said(tmp_path: Path, tamesu: Any,
                                                                         serve: Any) -> None:
    # 3 passes of 4 at 0.5: whatever the spoiled run would have been, the test passes; and the line says it
    _spoiling_project(tmp_path, serve(_agent("PPPPPPFF")).url, 0.5)
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  suite/book  3/4 runs passed, 1 inconclusive" in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert line["status"] == "passed" and line["stats"]["runs"] == 3, line


HOOKED = """\
targets:
  agent: {{ type: rest, url: "{url}/chat" }}
hooks:
  before_each:
    # every second run's hook fails (runs 2 and 4): the environment's error, not the agent's
    - run: 'n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ $((n % 2)) -eq 0 ]'
tests:
  - name: book
    target: agent
    repeat: {repeat}
    pass_threshold: {threshold}
    scenario: {{ script: [ {{ say: "book it" }} ] }}
    assert: [ {{ contains: "booked" }} ]
"""


def _hooked(tmp_path: Path, url: str, repeat: int, threshold: float) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(HOOKED.format(url=url, repeat=repeat, threshold=threshold))


def _run_json(tmp_path: Path) -> dict[str, Any]:
    [run_dir] = list((tmp_path / "out").iterdir())
    return dict(json.loads((run_dir / "run.json").read_text()))


def test_runs_the_environment_broke_count_neither_way_and_are_said(tmp_path: Path, tamesu: Any,
                                                                   serve: Any) -> None:
    # before: PASS 2/4 at 0.5 with the two errored runs counted as failures, and said nowhere (run.json error 0,
    # nothing on the console); `tamesu view` called the test flaky
    _hooked(tmp_path, serve(_agent("P")).url, 4, 0.5)
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"TAMESU_STORE": "true"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  suite/book  2/4 runs passed, 2 errors" in result.stdout, result.stdout
    assert "! run 2: before_each hook" in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert (line["status"], line["error_runs"], line["stats"]["runs"], line["stats"]["rate"]) == (
        "passed", 2, 2, 1.0), line
    assert _run_json(tmp_path)["runs"] == {"passed": 2, "error": 2}
    pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")
    from tamesu.store.db import Store
    from tamesu.store.queries import Reader

    store = Store(f"sqlite:///{tmp_path / '.tamesu' / 'store.db'}")
    try:
        [row] = Reader(store).tests()
        assert row.flaky_commits == [], row
    finally:
        store.close()


def test_errors_that_leave_too_few_runs_make_the_test_an_error_and_a_failure_stays_a_failure(
        tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # 2 passes of 4 at 0.75: the two errored runs could have passed or failed, so nothing is decided (exit 3)
    _hooked(tmp_path, serve(_agent("P")).url, 4, 0.75)
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    line = _results(tmp_path)["book"]
    assert line["status"] == "error" and line["reason"].startswith(
        "2 of 4 runs errored, too many to decide: 2 passed, pass_threshold 0.75 needs 3 of 4 (run 2: "), line
    # before: one failure of the agent beside an errored run made the whole test an error (exit 3); at a
    # threshold of 1 the failure decides it whatever the errored run would have been
    (tmp_path / "count").unlink()
    _hooked(tmp_path, serve(_agent("F")).url, 3, 1)
    failed = tamesu(["run", "--out", "out2"], cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL  suite/book  0/3 runs passed, 1 error" in failed.stdout and "fault: " in failed.stdout


def test_a_passing_flaky_tests_failed_runs_are_said_with_their_check_and_fault(tmp_path: Path, tamesu: Any,
                                                                               serve: Any) -> None:
    # before: "PASS  suite/book  2/4 runs passed" and the statistics line, nothing of which runs failed or why
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {{ type: rest, url: "{serve(_agent("PF")).url}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 4
    pass_threshold: 0.5
    scenario: {{ script: [ {{ say: "book it" }} ] }}
    assert: [ {{ contains: "booked" }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "PASS  suite/book  2/4 runs passed" in lines[1], result.stdout
    failed = [line for line in lines if "✗ run " in line]
    assert len(failed) == 2, result.stdout
    assert all(line.strip().startswith("✗ run ") and ': contains: ' in line and '"booked"' in line
               for line in failed), failed
    numbers = sorted(line.split("✗ run ")[1].split(":")[0] for line in failed)
    assert f"fault: agent (runs {', '.join(numbers)})" in result.stdout, result.stdout


def test_a_repeated_test_whose_every_run_errored_has_no_rate(tmp_path: Path, tamesu: Any) -> None:
    # before: "rate 0.00 [0.00, 1.00] · (pass_k 1, 2: more than the 0 runs, left out)" on the console and in
    # Markdown, "0/0 = 0.00" in HTML and tamesu.pass_rate 0.0000 in JUnit: an agent never reached read as one
    # that failed every time
    from ports import refused_port

    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {{ type: rest, url: "http://127.0.0.1:{refused_port()}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 3
    pass_k: [1, 2]
    scenario: {{ script: [ {{ say: "book it" }} ] }}
    assert: [ {{ contains: "booked" }} ]
""")
    result = tamesu(["run", "--out", "out", "--report", "html,junit:j.xml,markdown:m.md"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "ERR   suite/book  0/3 runs passed, 3 errors" in result.stdout, result.stdout
    assert "      no rate: no run passed or failed · undecided at 95% (threshold 1)\n" in result.stdout, result.stdout
    assert "rate 0.00" not in (tmp_path / "m.md").read_text()
    assert "| no rate: no run passed or failed |" in (tmp_path / "m.md").read_text()
    junit = (tmp_path / "j.xml").read_text()
    assert 'name="tamesu.runs" value="0"' in junit and "tamesu.pass_rate" not in junit, junit
    [run_dir] = list((tmp_path / "out").iterdir())
    page = (run_dir / "report.html").read_text()
    assert "no rate: no run passed or failed" in page and "0/0 = " not in page


def test_a_pass_k_larger_than_the_runs_is_said_not_dropped(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: pass_k [1, 5] with repeat 3 gave pass^1 alone, without a word, at validate or in the result
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {{ type: rest, url: "{serve(_agent("P")).url}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 3
    pass_k: [1, 5]
    scenario: {{ script: [ {{ say: "book it" }} ] }}
    assert: [ {{ contains: "booked" }} ]
""")
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "warning: suite.yaml:7:17: tests[0].pass_k[1]: pass_k 5 is more than repeat (3): pass^5 cannot be " \
           "estimated from 3 runs, so it is left out" in checked.stdout + checked.stderr, checked.stderr
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pass^1 1.00 (pass_k 5: more than the 3 runs, left out)" in result.stdout, result.stdout
    stats = _results(tmp_path)["book"]["stats"]
    assert (list(stats["pass_hat_k"]), stats["left_out_k"]) == (["1"], [5]), stats


def test_a_repeated_test_below_its_threshold_says_why(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: FAIL with each failing run's check and no reason (results.jsonl reason null): no line said the runs
    # together were below the threshold
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {{ type: rest, url: "{serve(_agent("PPFFFF")).url}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 6
    pass_threshold: 0.5
    scenario: {{ script: [ {{ say: "book it" }} ] }}
    assert: [ {{ contains: "booked" }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    why = "2 of 6 runs passed, rate 0.33 below pass_threshold 0.5"
    # on the console, the test's line and its statistics say it: `2/6 runs passed`, `rate 0.33 ... (threshold
    # 0.5)`; the reason beneath them said both again (result.json and the reports keep it, where it is alone)
    assert "  2/6 runs passed  " in result.stdout and "rate 0.33 [" in result.stdout, result.stdout
    assert "(threshold 0.5)" in result.stdout and why not in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert (line["status"], line["reason"]) == ("failed", why), line


def test_an_adaptive_test_at_threshold_0_stops_at_min_runs(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: decided (every rate reaches 0) from the first run, and all 30 runs were made all the same
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {{ type: rest, url: "{serve(_agent("F")).url}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 30
    pass_threshold: 0
    adaptive: {{ min_runs: 3 }}
    scenario: {{ script: [ {{ say: "book it" }} ] }}
    assert: [ {{ contains: "booked" }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    line = _results(tmp_path)["book"]
    assert (line["status"], line["total_runs"], line["stats"]["adaptive"]["runs_saved"]) == ("passed", 3, 27), line
