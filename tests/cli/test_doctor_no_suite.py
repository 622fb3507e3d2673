"""doctor's line for the suites: no suite is said once, as its FAIL, whatever named none, and the project is
checked all the same; a suite of no test is not an `ok` line."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

MODELS = "models:\n  judge: { provider: fake, rules: [] }\n"


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line[6:].startswith(("project file", "results store"))
            and ("suite" in line or "models.judge" in line or "JSONL" in line)]


def test_every_way_of_naming_no_suite_is_one_fail_and_the_project_is_checked(tmp_path: Path) -> None:
    # before: `suites: []` and a folder given stopped doctor at the FAIL (its models never checked), where the
    # default globs matching nothing went on
    for name, project, args, fail in [
        ("globs", MODELS, [], "FAIL  tamesu.yaml:1:1: no suite files match suites/*.yaml, **/*.tamesu.yaml"),
        ("empty", "suites: []\n" + MODELS, [], "FAIL  tamesu.yaml:1:9: suites: the list is empty"),
        ("folder", MODELS, ["nothing"], "FAIL  nothing:1:1: no suite files in nothing"),
    ]:
        folder = tmp_path / name
        (folder / "nothing").mkdir(parents=True)
        (folder / "tamesu.yaml").write_text(project)
        done = run_tamesu(["doctor", *args], cwd=folder)
        assert done.returncode == 3, done.stdout + done.stderr
        lines = _lines(done.stdout)
        assert len(lines) == 2 and lines[0].startswith(fail), (name, done.stdout)
        assert lines[1] == "ok    models.judge (fake:fake): ready", (name, done.stdout)


def test_a_suite_of_no_test_is_a_warning_and_jsonl_cases_are_said_once(tmp_path: Path) -> None:
    # before: "ok    0 tests in 1 suite validate" (nothing would run), and beside "1 test case in 1 JSONL file
    # validate" a warning that `tamesu validate` checks them, as if doctor had not
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml", "*.jsonl"]\n' + MODELS)
    (tmp_path / "s.tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
                                            "tests: []\n")
    (tmp_path / "c.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    done = run_tamesu(["doctor"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _lines(done.stdout) == ["warn  0 tests in 1 suite validate", "ok    1 test case in 1 JSONL file validate",
                                   "warn  s.tamesu.yaml:1:1: no tests in this suite",
                                   "ok    models.judge (fake:fake): ready"], done.stdout
    (tmp_path / "s.tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
                                            "tests: [ { name: t, scenario: { script: [ { say: hi } ] } } ]\n")
    done = run_tamesu(["doctor"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _lines(done.stdout)[:2] == ["ok    1 test in 1 suite validate",
                                       "ok    1 test case in 1 JSONL file validate"], done.stdout
