"""The last crashes on bad input and environments (issue 32, item 6): each is one clear line with the right exit
code (2 for what the user wrote, 3 for where tamesu could not write), never an internal error, and an honest
suite of 5,000 tests in one plain file loads and runs.

Unreadable and read-only folders are played as root by dropping the two capabilities that let root ignore
file modes (in the fork of the warm zygote, as setpriv would for a new process), so the same tests mean the same
thing in CI (root) and on a laptop (a user).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import forked
from tamesu.plan import load_plan
from tamesu.results.sharding import Shard, select

SUITE = "tests:\n  - name: t\n    target: bot\n    scenario: { script: [{ say: hi }] }\n"
PROJECT = ('models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n'
           "targets:\n  bot: { type: model, model: target }\n")
CASES = '{"id": "a", "input": "hi"}\n'


def _tamesu(args: list[str], cwd: Path, *, as_user: bool = False, timeout: float = 60) -> Any:
    """`tamesu ARGS` as a child process (a fork of the warm zygote: tests/forked.py); `as_user`: without the
    capabilities that let root ignore file modes."""
    if as_user and os.geteuid() == 0 and not _forked() and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to hold")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TAMESU_DEBUG", None)
    return forked.run(args, cwd, env, timeout, as_user=as_user)


def _forked() -> bool:
    return os.environ.get("TAMESU_TEST_FORK", "1") != "0"


def _one_line(done: Any, code: int, *words: str) -> str:
    """The command failed with `code` and said so on one line (plus the problem count for problems)."""
    lines = [line for line in done.stderr.splitlines() if line and not line.endswith("problem found")]
    assert done.returncode == code, done.stdout + done.stderr
    assert len(lines) == 1 and "internal error" not in done.stderr and "Traceback" not in done.stderr, \
        done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("rules", ["/dev/zero", "fifo"])
def test_a_fake_rules_file_that_never_ends_is_one_problem_at_once(rules: str, tmp_path: Path) -> None:
    if rules == "fifo":
        os.mkfifo(tmp_path / "rules.yaml")  # nobody writes it: reading would block for ever
        rules = "rules.yaml"
    (tmp_path / "tamesu.yaml").write_text(f"models:\n  judge: {{ provider: fake, rules: {rules} }}\n"
                                          "targets:\n  bot: { type: model, model: judge }\n")
    (tmp_path / "s.yaml").write_text(SUITE)
    started = time.monotonic()
    done = _tamesu(["validate", "s.yaml"], tmp_path, timeout=30)
    line = _one_line(done, 2, "tamesu.yaml:2:", "models.judge.rules: fake rules")
    assert ("a device" if rules == "/dev/zero" else "a FIFO") in line
    assert time.monotonic() - started < 15  # before: 11.7 s and 2.95 GB, then MemoryError; the FIFO hung


def test_an_unreadable_suite_folder_or_file_is_one_problem(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "s.yaml").write_text(SUITE)
    (tmp_path / "sub" / "m.jsonl").write_text(CASES)
    (tmp_path / "closed.yaml").write_text(SUITE)
    (tmp_path / "sub").chmod(0)
    (tmp_path / "closed.yaml").chmod(0)
    try:
        for args, where in [(["validate", "sub/s.yaml"], "sub/s.yaml:1:1: cannot read the file: Permission denied"),
                            (["run", "sub/s.yaml"], "sub/s.yaml:1:1: cannot read the file: Permission denied"),
                            (["validate", "sub"], "sub:1:1: cannot read the folder: Permission denied"),
                            (["validate", "closed.yaml"], "closed.yaml:1:1: cannot read the file: Permission denied"),
                            (["list", "closed.yaml"], "closed.yaml:1:1: cannot read the file: Permission denied"),
                            (["test", "-i", "sub/m.jsonl", "-n", "http://127.0.0.1:9/chat"],
                             "sub/m.jsonl:1:1: cannot read the file: Permission denied"),
                            (["test", "-i", "sub", "-n", "http://127.0.0.1:9/chat"],
                             "sub:1:1: cannot read the folder: Permission denied")]:
            assert _one_line(_tamesu(args, tmp_path, as_user=True), 2) == where, args
    finally:
        (tmp_path / "sub").chmod(0o755)


def test_a_symlink_loop_given_to_test_is_one_problem(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "m.jsonl").symlink_to("n.jsonl")
    (tmp_path / "tests" / "n.jsonl").symlink_to("m.jsonl")
    done = _tamesu(["test", "-i", "tests/m.jsonl", "-n", "http://127.0.0.1:9/chat"], tmp_path)
    assert _one_line(done, 2) == "tests/m.jsonl:1:1: cannot read the file: a symlink loop"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_under_o_is_one_line_and_exit_3(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text(PROJECT)
    (tmp_path / "m.jsonl").write_text(CASES)
    dry = _tamesu(["test", "-i", "m.jsonl", "-n", "bot", "--dry-run", "-o", "/dev/full"], tmp_path)
    assert _one_line(dry, 3) == "tamesu test: cannot write -o /dev/full: No space left on device"
    # a run: the file takes its first empty write, then refuses the records; the run ends, exit 3, said once
    done = _tamesu(["test", "-i", "m.jsonl", "-n", "bot", "-o", "/dev/full"], tmp_path)
    assert done.returncode == 3 and "internal error" not in done.stderr, done.stderr
    said = done.stdout + done.stderr  # the run's console warns, among its lines
    assert said.count("cannot write -o /dev/full: No space left on device") == 1, said


def test_read_only_folders_for_out_o_and_init_are_one_line_and_exit_3(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text(PROJECT)
    (tmp_path / "s.yaml").write_text(SUITE)
    (tmp_path / "m.jsonl").write_text(CASES)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    test = ["test", "-i", "m.jsonl", "-n", "bot"]
    for args, said in [
        ([*test, "--out", "ro/runs"], "tamesu test: cannot write the run folder in ro/runs: Permission denied"),
        ([*test, "-o", "ro/out.jsonl"], "tamesu test: cannot write -o ro/out.jsonl: Permission denied"),
        ([*test, "--dry-run", "-o", "ro/out.jsonl"], "tamesu test: cannot write -o ro/out.jsonl: Permission denied"),
        (["run", "s.yaml", "--out", "ro/runs"], "error: cannot write the run folder in ro/runs: Permission denied"),
        (["init", "ro"], "cannot write ro/tamesu.yaml: Permission denied"),
    ]:
        line = _one_line(_tamesu(args, tmp_path, as_user=True), 3)
        assert line.startswith(said), (args, line)
    assert list((tmp_path / "ro").iterdir()) == []  # nothing half-written
    inside = _tamesu(["init"], tmp_path / "ro", as_user=True)
    assert _one_line(inside, 3) == "cannot write tamesu.yaml: Permission denied"


def _generated(tests: int) -> str:
    return "tests:\n" + "".join(
        f"  - name: t{n}\n    target: bot\n    scenario:\n      script:\n        - say: hello {n}\n"
        "        - say: and bye\n    assert:\n      - contains: shipped\n" for n in range(tests))


def test_a_plain_suite_of_5000_generated_tests_loads_and_runs(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text(PROJECT)
    (tmp_path / "big.yaml").write_text(_generated(5_000))  # 25,000 list items, 40,000 keys
    started = time.monotonic()
    plan = load_plan([tmp_path / "big.yaml"], tmp_path / "tamesu.yaml")
    assert len(plan.tests) == 5_000
    assert time.monotonic() - started < 16  # about 2 s on a quiet machine; CI shares its cores
    # every test of the file is planned; one shard of about 100 runs end to end (the whole run takes ~20 s)
    shard = select(plan.tests, Shard(1, 50))
    done = _tamesu(["run", "big.yaml", "--shard", "1/50", "-p", "10"], tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run_dir = max((tmp_path / "tamesu-runs").iterdir())
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(results) == len(shard) > 50 and all(r["status"] == "passed" for r in results)
