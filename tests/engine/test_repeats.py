"""Issue 29: statistics of repeated runs, adaptive repeats, and failures attributed.

The statistical claims are checked in-process against the statistics code over many seeded repetitions (fast),
and end to end against a real local agent that answers right with a known probability (a few runs)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import OpenAIServer, text
from tamesu.results.stats import pass_at_k, pass_hat_k, repeat_stats, sequential_decision, wilson
from tamesu.roles.audit import deterministic_finding

# --- the statistics, against seeded repetitions -----------------------------------------------------------


def test_pass_hat_k_matches_the_hand_computed_value() -> None:
    # 10 runs, 7 passed. pass^3 = C(7,3)/C(10,3) = 35/120; pass@3 = 1 - C(3,3)/C(10,3) = 1 - 1/120
    assert pass_hat_k(10, 7, 3) == pytest.approx(35 / 120)
    assert pass_at_k(10, 7, 3) == pytest.approx(119 / 120)
    assert pass_hat_k(10, 7, 1) == pytest.approx(0.7) == pass_at_k(10, 7, 1)
    assert pass_hat_k(10, 7, 8) == 0.0 and pass_hat_k(10, 10, 10) == 1.0
    stats = repeat_stats(7, 10, 0.8, [1, 3, 20])  # a k beyond the runs is left out, not made up
    assert stats.pass_hat_k == {"1": 0.7, "3": round(35 / 120, 6)}
    assert repeat_stats(7, 10, 0.8).pass_hat_k.keys() == {"1", "10"}


def test_wilson_matches_the_issue_example() -> None:
    low, high = wilson(23, 30)
    assert (round(low, 2), round(high, 2)) == (0.59, 0.88)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0


def _agent_runs(p: float, rng: random.Random, n: int) -> int:
    """n runs of an agent that answers right with probability p: how many passed."""
    return sum(rng.random() < p for _ in range(n))


def test_the_interval_covers_the_true_rate_in_at_least_93_of_100() -> None:
    # the issue's example: 30 runs of an agent right 80% of the time, 100 seeded repetitions. One sample of
    # 100 varies by about 2 around its coverage; the next test checks the coverage itself, without sampling
    rng = random.Random(29)
    covered = 0
    for _ in range(100):
        low, high = wilson(_agent_runs(0.8, rng, 30), 30)
        covered += low <= 0.8 <= high
    assert covered >= 93, covered


@pytest.mark.parametrize("runs", [20, 50])
def test_the_intervals_exact_coverage_is_near_95_percent(runs: int) -> None:
    # the chance, summed over every outcome, that the interval holds the true rate: no sampling noise
    for p in (0.2, 0.5, 0.8, 0.9):
        coverage = sum(math.comb(runs, k) * p**k * (1 - p) ** (runs - k) for k in range(runs + 1)
                       if wilson(k, runs)[0] <= p <= wilson(k, runs)[1])
        assert coverage >= 0.92, (p, coverage)


def _adaptive(p: float, rng: random.Random, threshold: float = 0.8, repeat: int = 100,
              min_runs: int = 5) -> tuple[str, int]:
    passes = 0
    for n in range(1, repeat + 1):
        passes += rng.random() < p
        decided = sequential_decision(passes, n, threshold, 0.95, min_runs)
        if decided is not None:
            return decided, n
    return "fail", repeat  # undecided when repeat runs out: failed


@pytest.mark.parametrize(("p", "right"), [(0.95, "pass"), (0.5, "fail")])
def test_adaptive_repeats_decide_right_with_fewer_runs(p: float, right: str) -> None:
    rng = random.Random(29)
    outcomes = [_adaptive(p, rng) for _ in range(200)]
    correct = sum(decided == right for decided, _ in outcomes) / len(outcomes)
    mean_runs = sum(n for _, n in outcomes) / len(outcomes)
    print(f"p={p}: right in {correct:.1%}, {mean_runs:.1f} runs on average of 100")
    assert correct >= 0.95
    assert mean_runs < 100 * 0.6


def test_the_sequential_rule_keeps_its_error_rate_at_the_threshold() -> None:
    # an agent exactly at the threshold must rarely be called better than it is, however often one looks
    rng = random.Random(29)
    wrong = sum(_adaptive(0.75, rng)[0] == "pass" for _ in range(300))
    assert wrong / 300 <= 0.05


# --- the deterministic audit --------------------------------------------------------------------------------


def _user(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "text": t, "turn": i, "source": "simulator"} for i, t in enumerate(texts, 1)]


@pytest.mark.parametrize(("lines", "found"), [
    (["I want to fly to Paris", ""], "said nothing at turn 2"),
    # what it said is quoted as other reasons quote, in double quotes: a Python repr put single ones, and double
    # ones only when the words had an apostrophe ('As an AI' beside "I'm a simulated")
    (["As an AI language model, I can't book flights"], 'it says it is an AI ("As an AI")'),
    (["I'm a simulated user"], 'it says it is an AI ("I\'m a simulated")'),
    (["Book me a seat please", "Book me a seat please"], "repeated its previous line"),
    (["Hello! How can I help you today?"], 'spoke as the agent at turn 1 ("How can I help you")'),
    (["My booking ref is XYZ999"], 'booking_ref as "XYZ999", the persona\'s fact is "ABC123"'),
])
def test_each_deterministic_check_finds_its_case(lines: list[str], found: str) -> None:
    finding = deterministic_finding(_user(*lines), {"booking_ref": "ABC123"})
    assert finding is not None and found in finding.reason


def test_an_honest_user_and_a_scripted_line_are_not_blamed() -> None:
    honest = _user("I want to fly to Paris", "My booking ref is ABC123", "yes", "yes")
    assert deterministic_finding(honest, {"booking_ref": "ABC123"}) is None
    scripted = [{"role": "user", "text": "As an AI language model...", "turn": 1, "source": "script"}]
    assert deterministic_finding(scripted) is None


# --- end to end, against a real local agent -----------------------------------------------------------------


def _agent() -> Starlette:
    """Answers right ("Your flight is booked.") with probability `?p=` (seeded per path), else apologises."""
    draws: dict[str, random.Random] = {}

    async def chat(request: Request) -> JSONResponse:
        p = float(request.query_params.get("p", "1"))
        rng = draws.setdefault(str(request.url.query), random.Random(29))
        right = rng.random() < p
        return JSONResponse({"text": "Your flight is booked." if right else "Sorry, something went wrong."})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _project(tmp_path: Path, simulator_says: str, audit: str = "", defaults: str = "") -> None:
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  simulator: {{ provider: fake, rules: [ {{ say: {json.dumps(simulator_says)} }} ] }}\n" + audit
        + defaults)


def _results(tmp_path: Path) -> dict[str, dict[str, Any]]:
    [run_dir] = list((tmp_path / "out").iterdir())
    return {json.loads(x)["test"]: json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()}


FLIGHT = """\
targets:
  agent: {{ type: rest, url: "{url}/chat?p={p}" }}
tests:
  - name: book
    target: agent
    scenario: {{ goal: "Book a flight to Paris", max_turns: 2 }}
    assert: [ {{ contains: "booked" }} ]
"""


def test_a_simulator_that_breaks_character_makes_the_test_inconclusive(tmp_path: Path, tamesu: Any,
                                                                      serve: Any) -> None:
    url = serve(_agent()).url
    _project(tmp_path, "As an AI language model, I can't book flights")
    (tmp_path / "suite.yaml").write_text(FLIGHT.format(url=url, p=0))
    result = tamesu(["run", "--out", "out", "--report", "junit:junit.xml,github"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "INC   suite/book" in out and "1 inconclusive (the simulated user at fault)" in out, out
    assert out.count("is inconclusive") == 2 and "running it again with a new seed (2 of 2)" in out
    assert "(made 3 times)" in out  # the finding once, under the test's line (docs/repeats.md)
    assert "fault: simulated_user" in out and "✗" not in out  # never reported as the agent's failure
    line = _results(tmp_path)["book"]
    assert line["status"] == "inconclusive" and "it says it is an AI" in line["reason"]
    [run] = line["runs"]
    assert (run["fault"], run["reruns"], run["dir"]) == ("simulated_user", 2, "suite/book/run-1-rerun-2")
    junit = (tmp_path / "junit.xml").read_text()
    assert 'type="inconclusive"' in junit and 'name="tamesu.run.1.fault" value="simulated_user"' in junit
    assert "title=INC suite/book::inconclusive: the simulated user, not the agent, spoiled every run:%0A" in out


def test_junit_says_how_many_runs_were_inconclusive_beside_the_runs_the_rate_is_of(tmp_path: Path, tamesu: Any,
                                                                                   serve: Any) -> None:
    # before: only tamesu.runs, the conclusive runs (0 here), so 3 runs that said nothing of the agent read as none
    url = serve(_agent()).url
    _project(tmp_path, "As an AI language model, I can't book flights")
    (tmp_path / "suite.yaml").write_text(FLIGHT.format(url=url, p=0).replace(
        "    target: agent\n", "    target: agent\n    retries_inconclusive: 0\n"))
    result = tamesu(["run", "--out", "out", "--repeat", "3", "--report", "junit:junit.xml"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    import xml.etree.ElementTree as ET

    [case] = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert (properties["tamesu.runs"], properties["tamesu.total_runs"], properties["tamesu.inconclusive_runs"]) \
        == ("0", "3", "3"), properties


def test_the_honest_twin_with_a_broken_agent_fails_as_the_agents_fault(tmp_path: Path, tamesu: Any,
                                                                      serve: Any) -> None:
    url = serve(_agent()).url
    _project(tmp_path, "Can you check again? I need the Paris flight.")
    (tmp_path / "suite.yaml").write_text(FLIGHT.format(url=url, p=0))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  suite/book" in result.stdout and "✗ contains" in result.stdout, result.stdout
    assert "fault: agent" in result.stdout
    [run] = _results(tmp_path)["book"]["runs"]
    assert (run["status"], run["fault"], run["reruns"]) == ("failed", "agent", 0)


def test_a_simulator_that_ends_before_its_first_message_makes_the_run_inconclusive(tmp_path: Path, tamesu: Any,
                                                                                  serve: Any) -> None:
    # before: "the agent said nothing in 0 turn(s)", failed, fault: agent, though the agent was never asked
    url = serve(_agent()).url
    model = OpenAIServer()
    model.plan(*[text(json.dumps({"input": "", "goal_achieved": True}))] * 2,
               text(json.dumps({"input": "", "stop": True})))
    base = OpenAIServer.base_url(serve(model.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  simulator: {{ provider: openai, model: test-model, base_url: '{base}', api_key: x, timeout: 60s }}\n")
    (tmp_path / "suite.yaml").write_text(FLIGHT.format(url=url, p=1))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "INC   suite/book" in result.stdout and "fault: simulated_user" in result.stdout, result.stdout
    assert "running it again with a new seed (2 of 2)" in result.stdout and "fault: agent" not in result.stdout
    line = _results(tmp_path)["book"]
    assert line["status"] == "inconclusive"
    assert "the simulated user ended the conversation (simulator_stopped) before its first message" in line["reason"]
    [run] = line["runs"]
    assert (run["fault"], run["reruns"]) == ("simulated_user", 2)
    assert len(model.calls()) == 3  # each rerun asked the model anew; none reached the agent
    # the finding once on the console (its `?` line), and the test's time is its three runs' (before: the reason
    # line said it again, and the time was the last rerun's alone)
    assert result.stdout.count("ended the conversation (simulator_stopped)") == 1, result.stdout
    [run_dir] = list((tmp_path / "out").iterdir())
    made = [json.loads((run_dir / "suite" / "book" / name / "result.json").read_text())["duration_ms"]
            for name in ("run-1", "run-1-rerun-1", "run-1-rerun-2")]
    assert line["duration_ms"] == pytest.approx(sum(made), abs=0.01)


def test_a_simulator_that_ends_before_anything_is_said_passes_nothing(tmp_path: Path, tamesu: Any,
                                                                     serve: Any) -> None:
    # before: PASS, exit 0: `not_contains` holds of an agent that was never asked anything
    url = serve(_agent()).url
    model = OpenAIServer()
    model.plan(*[text(json.dumps({"input": "", "goal_achieved": True}))] * 3)
    base = OpenAIServer.base_url(serve(model.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  simulator: {{ provider: openai, model: test-model, base_url: '{base}', api_key: x, timeout: 60s }}\n")
    (tmp_path / "suite.yaml").write_text(FLIGHT.format(url=url, p=0).replace('contains: "booked"',
                                                                            'not_contains: "sorry"'))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "INC   suite/book" in result.stdout and "fault: simulated_user" in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert line["status"] == "inconclusive" and "before its first message" in line["reason"], line


AUDIT = """\
  simulator_audit:
    provider: fake
    rules:
      - {{ check: simulator_audit, transcript: "Tokyo", pass: false, reason: "the persona flies to Paris",
          evidence: [{evidence}] }}
      - {{ check: simulator_audit, pass: true, reason: "in character" }}
"""


@pytest.mark.parametrize(("evidence", "fault"), [('"I changed my mind, Tokyo"', "simulated_user"),
                                                  ('"a line nobody said"', "agent")])
def test_the_model_audit_blames_the_user_only_with_quotes_it_said(tmp_path: Path, tamesu: Any, serve: Any,
                                                                  evidence: str, fault: str) -> None:
    url = serve(_agent()).url
    _project(tmp_path, "I changed my mind, Tokyo it is.", AUDIT.format(evidence=evidence))
    (tmp_path / "suite.yaml").write_text(FLIGHT.format(url=url, p=0).replace("name: book", "name: book\n"
                                                                              "    retries_inconclusive: 0"))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    [run] = _results(tmp_path)["book"]["runs"]
    assert run["fault"] == fault, run
    detail = json.loads((run_dir / run["dir"] / "result.json").read_text())
    audits = [e for e in detail["events"] if e["name"] == "simulator_audit"]
    assert (len(audits) == 1) == (fault == "simulated_user")
    if audits:
        assert audits[0]["data"]["check"] == "simulator_audit.v1" and "persona flies to Paris" in run["fault_reason"]


ADAPTIVE = """\
defaults:
  adaptive: {{ confidence: 0.95, min_runs: 5 }}
targets:
  good: {{ type: rest, url: "{url}/chat?p=1" }}
  broken: {{ type: rest, url: "{url}/chat?p=0" }}
  coin: {{ type: rest, url: "{url}/chat?p=0.75" }}
tests:
  - {{ name: good, target: good, repeat: 60, pass_threshold: 0.8, scenario: {{ script: [{{ say: hi }}] }},
      assert: [ {{ contains: booked }} ] }}
  - {{ name: broken, target: broken, repeat: 60, pass_threshold: 0.8, scenario: {{ script: [{{ say: hi }}] }},
      assert: [ {{ contains: booked }} ] }}
  - {{ name: coin, target: coin, repeat: 20, pass_threshold: 0.8, pass_k: [1, 4],
      scenario: {{ script: [{{ say: hi }}] }}, assert: [ {{ contains: booked }} ] }}
"""


def test_adaptive_repeats_end_to_end_stop_early_either_way_and_say_so(tmp_path: Path, tamesu: Any,
                                                                      serve: Any) -> None:
    url = serve(_agent()).url
    _project(tmp_path, "hi")
    (tmp_path / "suite.yaml").write_text(ADAPTIVE.format(url=url))
    result = tamesu(["run", "--out", "out", "--parallel", "4", "--report", "json:report.json"], cwd=tmp_path)
    lines = _results(tmp_path)
    good, broken, coin = lines["good"], lines["broken"], lines["coin"]
    assert good["status"] == "passed" and good["stats"]["decided"] == "pass", result.stdout
    assert 5 <= good["total_runs"] < 60 and good["stats"]["adaptive"]["runs_saved"] == 60 - good["total_runs"]
    assert broken["status"] == "failed" and broken["total_runs"] < 15
    assert broken["reason"].startswith(f"decided below the threshold at {broken['total_runs']} runs: rate 0.00 [")
    # 20 runs of a 0.75 agent cannot settle 0.8 either way (20 passing of 20 could: fewer than 16 never can,
    # and is refused): undecided, and failed for it
    assert coin["status"] == "failed" and coin["total_runs"] == 20, coin
    stats = coin["stats"]
    low, high = wilson(stats["passes"], 20)
    assert coin["reason"] == (f"undecided at 20 runs: rate {stats['passes'] / 20:.2f} [{low:.2f}, {high:.2f}] "
                              "(pass_threshold 0.8)")
    assert stats["pass_hat_k"]["4"] == pytest.approx(pass_hat_k(20, stats["passes"], 4), abs=1e-6)
    assert "undecided at 20 runs" in result.stdout and "adaptive: " in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert {t["test"]: t["stats"]["runs"] for t in report["tests"]}["coin"] == 20
    # --repeat N keeps its meaning: N runs of every test, adaptive or not
    again = tamesu(["run", "--out", "again", "--repeat", "3"], cwd=tmp_path)
    [run_dir] = list((tmp_path / "again").iterdir())
    counts = {json.loads(x)["test"]: json.loads(x)["total_runs"]
              for x in (run_dir / "results.jsonl").read_text().splitlines()}
    assert counts == {"good": 3, "broken": 3, "coin": 3}, again.stdout


def test_jsonl_cases_take_repeat_pass_threshold_and_adaptive(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    url = serve(_agent()).url
    (tmp_path / "tamesu.yaml").write_text(
        f"cache: {{ mode: off }}\ntargets:\n  agent: {{ type: rest, url: '{url}/chat?p=1' }}\n")
    cases = [{"id": "adaptive", "input": "book it", "assert": [{"type": "contains", "value": "booked"}],
              "repeat": 40, "pass_threshold": 0.8, "adaptive": {"min_runs": 5}},
             {"id": "fixed", "input": "book it", "assert": [{"type": "contains", "value": "booked"}]}]
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    result = tamesu(["test", "-i", "cases.jsonl", "-n", "agent", "-o", "out.jsonl", "--out", "runs"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    records = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()}
    adaptive = records["adaptive"]["stats"]
    assert adaptive["decided"] == "pass" and adaptive["runs"] < 40 and adaptive["adaptive"]["runs_saved"] > 0
    assert "stats" not in records["fixed"]
    repeated = tamesu(["test", "-i", "cases.jsonl", "-n", "agent", "-o", "again.jsonl", "--out", "runs",
                       "--repeat", "3"], cwd=tmp_path)
    assert repeated.returncode == 0, repeated.stdout + repeated.stderr
    again = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "again.jsonl").read_text().splitlines()}
    assert again["adaptive"]["stats"]["runs"] == 3 and again["fixed"]["stats"]["runs"] == 3
    # the console says them too (it showed run 1's line alone, under the verdict over every run)
    assert repeated.stdout.count("  Runs: 3/3 passed (run 1 shown) · rate 1.00 [") == 2, repeated.stdout


def test_a_jsonl_cases_runs_line_says_the_runs_that_said_nothing_of_the_agent(tmp_path: Path, tamesu: Any,
                                                                            serve: Any) -> None:
    # before: its verdict line was "internal error: KeyError: 'inconclusive'" (exit 3), and "Runs: 0/0 passed"
    # of a case whose every run the simulated user spoiled said neither how many runs there were nor why none
    # counted
    url = serve(_agent()).url
    (tmp_path / "tamesu.yaml").write_text(
        f"cache: {{ mode: off }}\ntargets:\n  agent: {{ type: rest, url: '{url}/chat?p=0' }}\nmodels:\n"
        "  simulator: { provider: fake, rules: [ { say: \"As an AI language model, I can't book flights\" } ] }\n")
    case = {"id": "spoiled", "simulator": {"use": "simulator", "options": {"metadata": {"goal": "Book a flight"}}},
            "max_turns": 2, "checkpoints": [{"id": "booked", "assertion": {"type": "contains", "value": "booked"}}],
            "repeat": 2}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    result = tamesu(["test", "-i", "cases.jsonl", "-n", "agent", "-o", "out.jsonl", "--out", "runs"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "  Runs: 0/0 passed, 2 inconclusive (run 1 shown)" in result.stdout, result.stdout
    assert "  Verdict: " in result.stdout and "internal error" not in result.stderr, result.stdout + result.stderr
    [record] = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert record["status"] == "inconclusive" and record["inconclusive_runs"] == 2, record


def test_a_jsonl_case_whose_adaptive_min_runs_exceeds_its_repeat_is_refused_where_written(
        tmp_path: Path, tamesu: Any) -> None:
    # before: `validate` said ok and `test` ended in "internal error: ValidationError" (exit 3)
    (tmp_path / "tamesu.yaml").write_text("targets:\n  agent: { type: rest, url: 'http://127.0.0.1:9/chat' }\n")
    cases = [{"id": "ok", "input": "hi", "assert": [{"type": "contains", "value": "x"}]},
             {"id": "few", "input": "hi", "repeat": 3, "adaptive": {"min_runs": 5}},
             {"id": "none", "input": "hi", "adaptive": {"confidence": 0.9}}]
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    for command in (["validate", "cases.jsonl"], ["test", "-i", "cases.jsonl"]):
        result = tamesu([*command, "-n", "agent"], cwd=tmp_path)
        assert result.returncode == 2, (command, result.stdout + result.stderr)
        assert result.stderr.splitlines()[:2] == [
            "cases.jsonl:2:1: adaptive.min_runs (5) is more than repeat (3)",
            "cases.jsonl:3:1: adaptive.min_runs (5) is more than repeat (1)"], (command, result.stderr)


def test_a_repeated_case_that_failed_shows_a_failing_run_and_why(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: a ✗ over "Assertions: 1/1 passed" and run 1's right answer, no reason on the console; the -o
    # record had no fault and left `decided` out
    url = serve(_agent()).url
    (tmp_path / "tamesu.yaml").write_text(
        f"cache: {{ mode: off }}\ntargets:\n  agent: {{ type: rest, url: '{url}/chat?p=0.75' }}\n")
    case = {"id": "coin", "input": "book it", "assert": [{"type": "contains", "value": "booked"}], "repeat": 20,
            "pass_threshold": 0.8, "adaptive": {"min_runs": 5}}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    result = tamesu(["test", "-i", "cases.jsonl", "-n", "agent", "-o", "out.jsonl", "--out", "runs",
                     "--parallel", "1"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    [record] = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert record["status"] == "failed" and record["stats"]["decided"] is None, record
    assert record["fault"] == "agent" and record["shown_run"] > 1, record
    assert record["response"] == "Sorry, something went wrong.", record
    assert f"(run {record['shown_run']} shown)" in result.stdout, result.stdout
    assert "  Verdict: undecided at 20 runs: rate 0.85 [" in result.stdout, result.stdout


def test_an_adaptive_test_that_could_never_pass_is_refused_where_written(tmp_path: Path, tamesu: Any) -> None:
    # before: 10 of 10 runs passing, "FAIL undecided at 10 runs: rate 1.00 [0.72, 1.00] (pass_threshold 1)",
    # and validate said ok: with the default pass_threshold of 1, or too few runs to show 0.8, it never passes
    (tmp_path / "s.tamesu.yaml").write_text("""
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
defaults:
  adaptive: { min_runs: 5 }
tests:
  - { name: no threshold, repeat: 10, adaptive: { min_runs: 5 }, scenario: { script: [ { say: hi } ] } }
  - { name: too few, repeat: 5, pass_threshold: 0.8, scenario: { script: [ { say: hi } ] } }
  - { name: enough, repeat: 16, pass_threshold: 0.8, scenario: { script: [ { say: hi } ] } }
""")
    (tmp_path / "cases.jsonl").write_text(json.dumps(
        {"id": "few", "input": "hi", "repeat": 5, "pass_threshold": 0.8, "adaptive": {"min_runs": 5}}) + "\n")
    result = tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "s.tamesu.yaml:9:49: tests[0].adaptive: adaptive with pass_threshold 1: no number of passing runs shows "
        "that rate with confidence, so the test can never pass (give pass_threshold below 1, e.g. 0.9)",
        "s.tamesu.yaml:10:5: tests[1]: adaptive: even 5 passing runs of 5 would not show pass_threshold 0.8 (their "
        "interval's low end is 0.57), so the test can never pass: give repeat 16 or more, or a lower pass_threshold "
        "(adaptive from defaults)",
        "2 problems found"], result.stderr
    (tmp_path / "tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n")
    cases = tamesu(["validate", "cases.jsonl", "-n", "bot"], cwd=tmp_path)
    assert cases.returncode == 2, cases.stdout + cases.stderr
    assert cases.stderr.startswith("cases.jsonl:1:1: adaptive: even 5 passing runs of 5 would not show "
                                   "pass_threshold 0.8"), cases.stderr


def test_an_adaptive_test_that_ran_out_of_runs_is_judged_by_their_interval(tmp_path: Path, tamesu: Any) -> None:
    # before: 20 of 20 passed, the statistics line said "decided: passes at 95%", and the test FAILED as
    # "undecided at 20 runs" (the stopping rule, stricter than the interval of a fixed number of runs)
    (tmp_path / "s.tamesu.yaml").write_text("""
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - name: steady
    repeat: 20
    pass_threshold: 0.8
    adaptive: { confidence: 0.95, min_runs: 5 }
    scenario: { script: [ { say: hi } ] }
    assert: [ { contains: hello } ]
""")
    result = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  s/steady  20/20 runs passed" in result.stdout and "decided: passes" in result.stdout
