"""Tests leave nothing in examples/ and tests/fixtures (tests/source_tree.py, checked when every session ends).

Before: each run of the JSONL and engine tests against the example expense agent, and of the demos, left a
`.tamesu/store.db` beside the example's tamesu.yaml; git ignores it, so nobody saw it, and the next run read that
history back."""

from __future__ import annotations

from pathlib import Path

import source_tree
from agents.expense_agent import EXAMPLE, ExpenseAgent, expense_agent, run_test

__all__ = ["expense_agent"]  # a fixture, imported to be found by pytest


def test_a_run_against_the_example_keeps_its_history_out_of_the_example(expense_agent: ExpenseAgent,
                                                                        tmp_path: Path) -> None:
    before = source_tree.files_under([EXAMPLE])
    done = run_test(["-i", "What is the expense policy?", "-n", "expense", "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert source_tree.left_behind(before, [EXAMPLE]) == []
    assert expense_agent.store.is_file()


def test_the_check_names_each_new_file_and_not_compiled_modules(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("there before")
    before = source_tree.files_under([tmp_path])
    (tmp_path / ".tamesu").mkdir()
    (tmp_path / ".tamesu" / "store.db").write_bytes(b"")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "agent.cpython-311.pyc").write_bytes(b"")
    assert source_tree.left_behind(before, [tmp_path]) == [str(tmp_path / ".tamesu" / "store.db")]
