"""A run folder whose files cannot all be read is said to be so, wherever it is read: `tamesu report` and
`tamesu store import` (before, an unreadable run.json read as a run that never finished, with nothing said, and
an import left out an unreadable result without a word)."""

from __future__ import annotations

import json
import shutil
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


def _run(tmp_path: Path) -> Path:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"TAMESU_STORE": "off"})
    assert done.returncode == 1, done.stdout + done.stderr
    return next((tmp_path / "out").iterdir())


def test_an_unreadable_run_json_is_said_and_never_reads_as_a_pass(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    cut = tmp_path / "cut"
    shutil.copytree(run_dir, cut)
    (cut / "run.json").write_text('{"schema_version": 1, "exit_co')  # a disk that filled up
    report = run_tamesu(["report", str(cut)], cwd=tmp_path)
    assert report.returncode == 1, report.stdout + report.stderr  # its failed test, counted from results.jsonl
    assert f"warning: {cut}/run.json: unreadable: the run is counted from what results.jsonl holds" in report.stdout
    assert "1 passed, 1 failed" in report.stdout
    # a folder of nothing else readable was "0 passed, 0 failed", exit 0: a green CI step of nothing
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text("{}")
    nothing = run_tamesu(["report", str(empty), "--report", "junit:-"], cwd=tmp_path)
    assert nothing.returncode == 3, nothing.stdout + nothing.stderr
    assert f"warning: {empty}/run.json: unreadable" in nothing.stderr


def test_an_unreadable_result_is_said_by_report_and_import(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text(lines[0][:30] + "\n" + lines[1] + "\n")
    report = run_tamesu(["report", str(run_dir)], cwd=tmp_path)
    assert f"{run_dir}: 1 of 2 planned tests did not finish (results.jsonl has unreadable lines)" in report.stderr
    store = tmp_path / "history.db"
    imported = run_tamesu(["store", "import", str(run_dir), "--store", f"sqlite:///{store}"], cwd=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert f"imported {run_dir}: 1 test(s) as run {run_dir.name}" in imported.stdout
    assert f"warning: {run_dir}/results.jsonl:1: unreadable result (JSONDecodeError), left out" in imported.stderr
    # `tamesu merge` of it: the line was left out of the merged run with no word
    merged = run_tamesu(["merge", str(run_dir), "--out", "merged"], cwd=tmp_path)
    assert f"warning: {run_dir}/results.jsonl:1: unreadable result (JSONDecodeError), left out" in merged.stderr
    assert "1 of 2 planned tests did not finish (results.jsonl of a run has unreadable lines)" in merged.stderr
    [merged_dir] = list((tmp_path / "merged").iterdir())
    assert any("unreadable result" in w for w in json.loads((merged_dir / "run.json").read_text())["warnings"])
