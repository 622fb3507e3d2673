"""The MCP server's log as tamesu writes it: masked line by line through a pipe, a line bounded."""

from __future__ import annotations

import os
from pathlib import Path

from tamesu.suite.secrets import Redactor
from tamesu.targets.mcp.errlog import LINE_LIMIT, MaskedLog, discard


async def test_a_line_past_the_limit_is_cut_said_and_keeps_no_secret(tmp_path: Path) -> None:
    redactor = Redactor()
    redactor.add("s3cret-token-77")
    path = tmp_path / "mcp-server.log"
    log = MaskedLog(path, redactor.text)
    writer = os.dup(log.fileno())  # as the server's stderr is: a descriptor of the pipe's writing end
    os.set_blocking(writer, False)
    try:
        os.write(writer, b"start s3cret-token-77\n")
        long_line = b"x" * (LINE_LIMIT + 10) + b" s3cret-token-77 tail\n"
        sent = 0
        while sent < len(long_line):  # the pipe holds 64 KiB: what it takes, the log reads as the server writes
            try:
                sent += os.write(writer, long_line[sent:])
            except BlockingIOError:
                log.flush()
        os.write(writer, b"after s3cret-token-77")  # the last line has no newline: kept at close
    finally:
        os.close(writer)
    discard(path, log)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "start ***"
    assert lines[1].startswith("x" * 100) and "s3cret" not in lines[1]
    assert lines[1].endswith(f"[... {len(long_line) - 1 - LINE_LIMIT} more bytes of this line not kept: a line is "
                             f"kept up to {LINE_LIMIT} bytes]")
    assert lines[2:] == ["after ***"]


async def test_a_server_that_wrote_nothing_leaves_no_log(tmp_path: Path) -> None:
    path = tmp_path / "mcp-server.log"
    discard(path, MaskedLog(path, Redactor().text))
    assert not path.exists()


async def test_a_long_stdout_line_cut_inside_a_secret_keeps_no_head_of_it(tmp_path: Path) -> None:
    # a stdio server's stdout line that is not JSON-RPC is kept cut (120 characters in the event, 2000 in the log):
    # cut bare, a secret the cut fell in left its first characters in both
    from tamesu.targets.mcp.connection import StdoutNoise

    redactor = Redactor()
    redactor.add("s3cret-token-77")
    path = tmp_path / "mcp-server.log"
    log = MaskedLog(path, redactor.text)
    noise = StdoutNoise(log)
    noise.add("x" * 110 + " s3cret-token-77 and more")
    noise.add("y" * 1990 + " s3cret-token-77 and more")
    discard(path, log)
    assert "s3cret" not in redactor.text(noise.first) and redactor.text(noise.first).endswith("x ***…")
    written = path.read_text(encoding="utf-8")
    assert "s3cret" not in written and "y ***…" in written, written[-200:]
