"""`tamesu run --report json:-` (and `merge`): the report alone on standard output, the console on standard error.
Before, stdout began with `tamesu running 2 tests...` and the PASS/FAIL lines, and `jq` could not read it."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_tamesu

_SUITE = """
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - { name: greets, scenario: { script: [ { say: hi } ] }, assert: [ { contains: hello } ] }
  - { name: refunds, scenario: { script: [ { say: hi } ] }, assert: [ { contains: refund } ] }
"""


def test_a_report_to_stdout_is_alone_there(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "json:-"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert sorted(test["test"] for test in report["tests"]) == ["greets", "refunds"]
    assert "FAIL  s/refunds" in done.stderr and "1 passed, 1 failed" in done.stderr
    run_dir = next((tmp_path / "out").iterdir())
    merged = run_tamesu(["merge", str(run_dir), "--out", "merged", "--report", "junit:-"], cwd=tmp_path)
    assert merged.returncode == 1 and merged.stdout.lstrip().startswith("<?xml"), merged.stdout + merged.stderr
    assert "merged 1 run into" in merged.stderr
    # `tamesu report` of the run against a baseline: the comparison on stderr, the JSON alone on stdout (before,
    # stdout began with "compared with ...: 1 regression" and json.load failed)
    baseline = next((tmp_path / "merged").iterdir())  # the same verdicts in another folder: a run to compare with
    again = run_tamesu(["report", str(run_dir), "--baseline", str(baseline), "--report", "json:-"], cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert json.loads(again.stdout)["baseline"] is not None
    assert "compared with" in again.stderr


def test_report_given_twice_writes_both(tmp_path: Path) -> None:
    # click kept only the last --report: `--report json --report junit` wrote junit.xml alone
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "json", "--report", "junit"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    run_dir = next((tmp_path / "out").iterdir())
    assert (run_dir / "report.json").is_file() and (run_dir / "junit.xml").is_file()


def test_a_path_through_a_file_is_said_so(tmp_path: Path) -> None:
    # "cannot write the junit report to .../notes/x.xml: File exists", and `tamesu schema --write` through a file
    # was "internal error: NotADirectoryError"
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    (tmp_path / "notes").write_text("a file")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "junit:notes/x.xml"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"cannot write the junit report to {tmp_path}/notes/x.xml: a file is in the way of a folder: " \
           f"{tmp_path}/notes (or a folder above it) is a file" in done.stdout + done.stderr
    schema = run_tamesu(["schema", "--write", "notes/schemas"], cwd=tmp_path)
    assert schema.returncode == 3 and "internal error" not in schema.stderr, schema.stderr
    assert "tamesu schema: cannot write notes/schemas: a file is in the way of a folder" in schema.stderr


def test_github_annotations_beside_a_report_on_stdout_go_to_stderr(tmp_path: Path) -> None:
    # before: `--report json:-,github` printed the annotations on stdout after the JSON, and json.loads failed
    # ("Extra data"); GitHub reads workflow commands on standard error as well
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "github,json:-"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert [t["test"] for t in json.loads(done.stdout)["tests"] if t["status"] == "failed"] == ["refunds"]
    assert "::error file=s.tamesu.yaml,line=" in done.stderr and "title=FAIL s/refunds::" in done.stderr
    run_dir = next((tmp_path / "out").iterdir())
    again = run_tamesu(["report", str(run_dir), "--report", "junit:-,github"], cwd=tmp_path)
    assert again.returncode == 1 and again.stdout.lstrip().startswith("<?xml"), again.stdout + again.stderr
    assert again.stdout.rstrip().endswith("</testsuites>") and "title=FAIL s/refunds::" in again.stderr


def test_two_reports_on_stdout_are_refused(tmp_path: Path) -> None:
    # before: `--report json:-,junit:-` wrote a JSON document with XML after it, readable as neither
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "json:-,junit:-"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == "--report: json:- and junit:-: one report at most goes to standard output (-)"
    assert not (tmp_path / "out").exists()
    (tmp_path / "tamesu.yaml").write_text("suites: ['*.tamesu.yaml']\nreport: ['json:-', html, 'markdown:-']\n")
    checked = run_tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "tamesu.yaml:2:9: report: json:- and markdown:-: one report at most goes to standard output (-)" in \
        checked.stdout + checked.stderr


def test_a_report_to_stdout_is_not_written_in_the_run_folder(tmp_path: Path) -> None:
    # before: a report bound for stdout was rendered through `RUN/.KIND-report.tmp`, so a run folder tamesu may not
    # write to failed "cannot write the json report to standard output: Permission denied" (exit 3), and a folder
    # of that name there was an internal error (IsADirectoryError)
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    run_dir = next((tmp_path / "out").iterdir())
    for kind in ("json", "html"):
        (run_dir / f".{kind}-report.tmp").mkdir()  # in the way of any file of that name, for root as for others
    before = sorted(path.name for path in run_dir.iterdir())
    run_dir.chmod(0o555)
    try:
        piped = run_tamesu(["report", str(run_dir), "--report", "json:-"], cwd=tmp_path)
        html = run_tamesu(["report", str(run_dir), "--report", "html:-"], cwd=tmp_path)
    finally:
        run_dir.chmod(0o755)
    assert piped.returncode == 1, piped.stdout + piped.stderr
    assert sorted(test["test"] for test in json.loads(piped.stdout)["tests"]) == ["greets", "refunds"]
    # its links are the run folder's, as those of the run's own report.html
    assert html.returncode == 1 and html.stdout == (run_dir / "report.html").read_text(), html.stderr
    assert sorted(path.name for path in run_dir.iterdir()) == before


def test_a_report_that_cannot_be_written_beside_a_suites_error_exits_3(tmp_path: Path) -> None:
    # the worst code wins, and 3 comes before 2 (docs/reports-ci.md): a run whose only trouble was its suite's
    # error exited 2 when its JUnit report could not be written either, and CI read "fix the suite" alone
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace("assert: [ { contains: refund } ]",
                                                           "assert: [ { contains: hello, on_turn: 3 } ]"))
    (tmp_path / "notes").write_text("a file")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "junit:notes/x.xml"], cwd=tmp_path)
    assert "fault: suite" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 3, done.stdout + done.stderr
    run_dir = next((tmp_path / "out").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["exit_code"] == 2  # the run's own code, kept
