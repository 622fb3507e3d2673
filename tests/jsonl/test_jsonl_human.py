"""`--interactive`: a person's reply is one line of input; no line within the timeout is no input, and the case
that then goes without says the person gave none (the run ends skipped, failed or ended as on_missing_input says)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from jsonl.test_jsonl_examples import _block, _records
from tamesu.roles.human import Human, StdinLines

__all__ = ["expense_agent"]


async def test_a_reply_after_a_silence_that_timed_out() -> None:
    read_fd, write_fd = os.pipe()
    shown = io.StringIO()
    with os.fdopen(read_fd) as stream, os.fdopen(write_fd, "wb", buffering=0) as writer:
        # (the writer closes first: the reading thread ends before the stream is closed under it)
        human = Human(StdinLines(stream), out=shown)
        assert await human.ask("T2", 1, "Please provide PO number.", "PO-12345", timeout=0.2) is None
        assert human.silence == "no reply within 0.2s"
        writer.write(b"  PO-777  \n   \n")
        assert await human.ask("T2", 1, "Please provide PO number.", None, timeout=5) == "PO-777"
        assert human.silence is None
        assert await human.ask("T2", 1, "Please provide PO number.", None, timeout=5) is None
        assert human.silence == "an empty line"
        writer.close()  # end of input: no more replies, at once
        assert await human.ask("T2", 2, "Anything else?", None, timeout=5) is None
        assert human.silence == "stdin ended"
    assert "? [T2] the agent awaits input after turn 1:" in shown.getvalue()
    assert "  Hint: PO-12345" in shown.getvalue()
    assert shown.getvalue().count("(no reply)") == 2  # the silences; an empty line was seen typed


def test_a_case_nobody_answered_says_a_person_was_asked(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # before: 'no next turn defined' and 'Hint: Add more turns, use --interactive, ...' as if nobody had been asked
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--interactive", "--filter", "T002",
                     "-o", str(out), "--out", str(tmp_path)], env=expense_agent.env, stdin="")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _block(done.stdout, "T002").splitlines()[-6:] == [
        "  ├─ Turn 2: SKIPPED",
        "  │          Reason: Agent awaiting input, no next turn defined, nobody answered (stdin ended) "
        "(on_missing_input: skip)",
        '  │          Agent asked: "Please provide PO number." (input hint: PO-12345)',
        "  │          Hint: Add more turns or configure a simulator",
        "  │",
        "  └─ Result: SKIPPED"]
    record = _records(out)["T002"]
    assert record["skip_reason"] == ("the agent awaits input after turn 1 and no next turn is defined, and the "
                                     "person asked gave none (stdin ended)")
    assert record["missing_input"]["person"] == "stdin ended"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--interactive", "--filter", "T002",
                     "--on-missing-input", "fail", "-o", str(out), "--out", str(tmp_path)], env=expense_agent.env,
                    stdin="\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(out.read_text())["error"] == (
        'the agent awaits input after turn 1 ("Please provide PO number.") and no input is available, and the '
        "person asked gave none (an empty line) (on_missing_input: fail)")
