"""`--interactive`: a person's reply is one line of input; no line within the timeout is no input."""

from __future__ import annotations

import io
import os

from tamesu.roles.human import Human, StdinLines


async def test_a_reply_after_a_silence_that_timed_out() -> None:
    read_fd, write_fd = os.pipe()
    shown = io.StringIO()
    with os.fdopen(read_fd) as stream:
        human = Human(StdinLines(stream), out=shown)
        assert await human.ask("T2", 1, "Please provide PO number.", "PO-12345", timeout=0.2) is None
        os.write(write_fd, b"  PO-777  \n")
        assert await human.ask("T2", 1, "Please provide PO number.", None, timeout=5) == "PO-777"
        os.close(write_fd)  # end of input: no more replies, at once
        assert await human.ask("T2", 2, "Anything else?", None, timeout=5) is None
    assert "? [T2] the agent awaits input after turn 1:" in shown.getvalue()
    assert "  Hint: PO-12345" in shown.getvalue()
    assert shown.getvalue().count("(no reply)") == 2
