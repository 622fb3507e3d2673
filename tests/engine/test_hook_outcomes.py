"""What a run is when its hooks misbehave: the environment's error, never the agent's failure."""

from __future__ import annotations

import json
from pathlib import Path

from agents.fixtures import RunningAgents, rest_agents
from conftest import run_tamesu

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


def _suite(folder: Path, url: str, hooks: str, tests: str) -> None:
    (folder / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\n')
    (folder / "s.tamesu.yaml").write_text(
        f"hooks:\n{hooks}targets:\n  bot:\n    type: rest\n    url: {url}/chat\n"
        '    request: { body: { message: "{{message}}", session_id: "{{session}}" } }\n'
        f"tests:\n{tests}")


def test_a_timeout_that_runs_out_in_a_before_each_hook_is_an_error(tmp_path: Path,
                                                                   rest_agents: RunningAgents) -> None:
    # before: FAIL, "the test took longer than its timeout (1s)", fault: agent, exit 1: an agent never spoken to
    _suite(tmp_path, rest_agents.url, '  before_each: [ { run: "sleep 5", timeout: 10s } ]\n',
           "  - { name: slow seed, timeout: 1s, scenario: { script: [ { say: never-sent } ] } }\n")
    spoken = dict(rest_agents.state.turns)
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "fault: environment" in done.stdout, done.stdout
    [result] = (tmp_path / "out").glob("*/s/slow-seed/run-1/result.json")
    record = json.loads(result.read_text())
    assert record["status"] == "error", record
    assert record["error"] == "before_each: the hooks were still running when the test's timeout (1s) ran out"
    assert rest_agents.state.turns == spoken  # the agent was never spoken to


def test_after_all_hooks_clean_up_after_a_failing_before_all_hook(tmp_path: Path,
                                                                  rest_agents: RunningAgents) -> None:
    # before: the before_all hook that set something up ran, the next failed, and no after_all hook ran: what
    # the first had started (a container, a seeded database) was left behind; after_each runs after a failing
    # before_each
    _suite(tmp_path, rest_agents.url,
           '  before_all: [ "echo set-up >> log", "exit 4" ]\n  after_all: [ "echo cleaned-up >> log" ]\n',
           "  - { name: t, scenario: { script: [ { say: hi } ] } }\n")
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\n'
                                          'hooks: { after_all: [ "echo project >> log" ] }\n')
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "before_all hook 2: `exit 4` exited with 4 (no output)" in done.stdout, done.stdout
    assert (tmp_path / "log").read_text().split() == ["set-up", "project", "cleaned-up"]


def test_the_projects_hooks_run_in_its_folder_and_a_suites_in_the_suites(tmp_path: Path,
                                                                         rest_agents: RunningAgents) -> None:
    # before: tamesu.yaml's hooks ran in each suite's folder, so `./seed.sh` beside tamesu.yaml was not found
    # from suites/ (and `tamesu test` ran them in the project's): paths in tamesu.yaml are relative to it
    (tmp_path / "suites").mkdir()
    _suite(tmp_path / "suites", rest_agents.url, '  before_all: [ "pwd > ../suite-before-all" ]\n',
           "  - { name: t, scenario: { script: [ { say: hi } ] } }\n")
    (tmp_path / "suites" / "tamesu.yaml").unlink()  # the project is the folder above
    (tmp_path / "seed.sh").write_text("pwd > project-before-each\n")
    (tmp_path / "tamesu.yaml").write_text(
        'suites: ["suites/*.tamesu.yaml"]\nhooks:\n  before_all: [ "pwd > project-before-all" ]\n'
        '  before_each: [ "sh ./seed.sh" ]\n  after_all: [ "pwd > project-after-all" ]\n')
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path / "suites")
    assert done.returncode == 0, done.stdout + done.stderr
    here = str(tmp_path.resolve())
    assert [(tmp_path / name).read_text().strip() for name in (
        "project-before-all", "project-before-each", "project-after-all", "suite-before-all")] == [
        here, here, here, str((tmp_path / "suites").resolve())]


def test_a_failing_hook_that_printed_a_long_line_says_its_end(tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: the whole 300,000-character line was the run's error: on the console, in results.jsonl twice, in
    # result.json, in the HTML report, for every test the hook ran before
    _suite(tmp_path, rest_agents.url,
           """  before_each: [ "python3 -c \\"print('x' * 300000 + ' the seed failed')\\"; exit 1" ]\n""",
           "  - { name: t, scenario: { script: [ { say: hi } ] } }\n")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout[:2000] + done.stderr[:2000]
    assert len(done.stdout) < 2000, len(done.stdout)
    [result] = (tmp_path / "out").glob("*/s/t/run-1/result.json")
    error = json.loads(result.read_text())["error"]
    assert error.endswith("exited with 1: …" + "x" * 383 + " the seed failed"), error[-100:]


def test_a_failing_before_all_hook_is_the_environments_fault_in_every_record(tmp_path: Path,
                                                                              rest_agents: RunningAgents) -> None:
    # before: the suite's tests were errors with no fault at all (results.jsonl, the JSON report: `fault: null`,
    # no `fault:` line on the console), where a failing before_each hook says `fault: environment`
    _suite(tmp_path, rest_agents.url, '  before_all: [ "exit 3" ]\n',
           "  - { name: t, scenario: { script: [ { say: hi } ] } }\n")
    done = run_tamesu(["run", "--out", "out", "--report", "json:r.json,junit:j.xml"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "fault: environment" in done.stdout, done.stdout
    [line] = (tmp_path / "out").glob("*/results.jsonl")
    [run] = json.loads(line.read_text())["runs"]
    said = "before_all hook 1: `exit 3` exited with 3 (no output)"
    assert (run["status"], run["fault"], run["fault_reason"]) == ("error", "environment", said), run
    [test] = json.loads((tmp_path / "r.json").read_text())["tests"]
    assert test["runs"][0]["fault"] == "environment", test
    assert '<error message="before_all hook 1' in (tmp_path / "j.xml").read_text()


def test_a_failing_before_all_hook_leaves_a_skipped_test_skipped_and_a_quarantined_one_quarantined(
        tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: both were ERR and the run exited 3: a test written `skip:` read as broken by a hook it would never
    # have waited for, and a quarantined test changed the exit code, which a quarantine never does
    _suite(tmp_path, rest_agents.url, '  before_all: [ "exit 3" ]\n',
           '  - { name: later, skip: "SUP-9 not yet", scenario: { script: [ { say: hi } ] } }\n'
           '  - { name: known, quarantine: { reason: "SUP-412 flaky" }, scenario: { script: [ { say: hi } ] } }\n')
    done = run_tamesu(["run", "--out", "out", "--report", "junit"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SKIP  s/later" in done.stdout and "QUAR  s/known" in done.stdout, done.stdout
    assert "0 passed, 0 failed, 1 quarantined, 1 skipped" in done.stdout, done.stdout
    [results] = (tmp_path / "out").glob("*/results.jsonl")
    lines = {r["test"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert (lines["later"]["status"], lines["later"]["skip_reason"]) == ("skipped", "SUP-9 not yet")
    assert (lines["known"]["status"], lines["known"]["quarantine"]) == ("quarantined", "SUP-412 flaky")
    [junit] = (tmp_path / "out").glob("*/junit.xml")
    assert 'message="quarantined (SUP-412 flaky): error: before_all hook 1: `exit 3`' in junit.read_text()
