"""A run folder that cannot be written: one line and exit 3 before any test runs, or, mid-run, a clean stop
that keeps every finished result whole, writes run.json and leaves no *.tmp behind.

A full disk is played by RLIMIT_FSIZE (writes past the limit fail with EFBIG, as ENOSPC would): the tests
run as root in CI, where a read-only folder is still writable.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any


def _project(folder: Path, tests: int) -> None:
    (folder / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n')
    (folder / "s.tamesu.yaml").write_text("targets:\n  bot: { type: model, model: target }\ntests:\n" + "".join(
        f"  - name: t{n}\n    target: bot\n    scenario: {{ script: [{{ say: hi }}] }}\n"
        "    assert: [{ contains: shipped }]\n" for n in range(tests)))


def test_an_out_folder_that_cannot_be_made_is_one_line_and_exit_3(tmp_path: Path, tamesu: Any) -> None:
    _project(tmp_path, 2)
    (tmp_path / "afile").write_text("")
    done = tamesu(["run", "--out", "afile/runs"], cwd=tmp_path)
    assert done.returncode == 3
    assert done.stderr.startswith("error: cannot write the run folder in afile/runs: a file is in the way of a "
                                  "folder: afile/runs/")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "PASS" not in done.stdout  # nothing ran


TESTS = 20
FILE_LIMIT = 6000
"""The largest file the run may write. results.jsonl outgrows it after about ten of the tests (a line is 500-700
bytes); every other file must stay well below it, or that file is the one said to fail: plan.json is about
4,600 bytes for twenty tests, a test's result.json about 2,600. (A 3,000-byte limit left result.json 430 bytes:
a few more fields in a turn and the test would fail on result.json instead of results.jsonl.)"""


def test_a_disk_that_fills_mid_run_stops_it_cleanly(tmp_path: Path) -> None:
    _project(tmp_path, TESTS)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))

    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "tamesu", "run", "--out", "out"], cwd=tmp_path, env=env,
                          preexec_fn=small_files, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "Traceback" not in output and "internal error" not in output
    assert "stopped early: the run folder cannot be written (results.jsonl): File too large" in done.stdout
    [run] = list((tmp_path / "out").iterdir())
    lines = (run / "results.jsonl").read_text().splitlines()
    assert 1 <= len(lines) < TESTS
    assert [json.loads(line)["status"] for line in lines] == ["passed"] * len(lines)  # whole lines only
    summary = json.loads((run / "run.json").read_text())
    assert summary["exit_code"] == 3 and summary["counts"]["total"] == len(lines)
    assert summary["stopped"].startswith("the run folder cannot be written")
    assert not list(run.rglob("*.tmp"))


def test_a_nul_byte_in_a_path_or_a_command_is_one_line(tmp_path: Path, tamesu: Any) -> None:
    # each was "internal error: ValueError: embedded null byte": the rules file at validate, the run folder, and a
    # before_all hook's command mid-run
    _project(tmp_path, 1)
    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: "r\\0.yaml" }\n')
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 2 and "no file can be named that: the name holds a NUL byte" in checked.stderr
    (tmp_path / "tamesu.yaml").write_text('out: "a\\0b"\nmodels:\n  target: { provider: fake, rules: [{ say: x }] }\n')
    ran = tamesu(["run"], cwd=tmp_path)
    assert ran.returncode == 3 and "no folder can be named that: it holds a NUL byte" in ran.stderr, ran.stderr
    (tmp_path / "tamesu.yaml").write_text('hooks: { before_all: [ "echo a\\0b" ] }\n'
                                          'models:\n  target: { provider: fake, rules: [{ say: x }] }\n')
    hooked = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert hooked.returncode == 3, hooked.stdout + hooked.stderr
    assert "`echo a\\0b` holds a NUL byte, which no command line can" in hooked.stdout
    assert "internal error" not in hooked.stdout + hooked.stderr + ran.stderr + checked.stderr


def test_validate_warns_of_an_out_folder_that_runs_through_a_file(tmp_path: Path, tamesu: Any) -> None:
    # validate said ok; every run then stopped at exit 3 before its first test
    _project(tmp_path, 1)
    (tmp_path / "notes").write_text("")
    (tmp_path / "tamesu.yaml").write_text('out: notes/runs\n'
                                          'models:\n  target: { provider: fake, rules: [{ say: x }] }\n')
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert f"tamesu.yaml:1:6: out: {tmp_path / 'notes'} is a file: no run folder can be made under it" \
        in checked.stderr, checked.stderr
