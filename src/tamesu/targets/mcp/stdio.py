"""The mcp target's stdio transport: the server as a child process whose stdout tamesu reads itself, line by
line with a bound, handing each JSON-RPC message to the SDK's session through memory streams.

The SDK's own stdio client reads each stdout line whole, so a server printing a 2 GB line had it read into
memory before `max_response_bytes` could bound what tamesu kept. Here no line is held past the limit plus
room for the JSON-RPC envelope: a longer one is refused as the HTTP transport refuses a body (the same note,
`_bounded_http.too_large_note`, given to `refused`), and the session ends, as it does over HTTP, so the call
waiting for that answer fails with the refusal as its reason. The rest of the server's output is read and
discarded, so a server stuck writing it can still exit when asked to.

Otherwise this does what the SDK's transport does:
- a stdout line that is not JSON-RPC never reaches the session: it goes to `noise` (the server's log, one note
  in the result), where the SDK logged a traceback and handed the session an exception;
- a reply whose id no request sent had (a server answering with another request's id) is told to `noise` too:
  the SDK drops it silently, and the call it was meant for read only as a timeout;
- the process gets the environment it is given, stderr to the `stderr` descriptor (`errlog.MaskedLog`'s pipe),
  a process group of its own;
- shutdown follows MCP's lifecycle, every wait bounded and shielded from the caller's cancellation so the
  server never outlives its session: the messages already accepted are flushed, stdin is closed, a grace
  period, then SIGTERM to its process group, then SIGKILL.
POSIX only, as the rest of tamesu's process handling (`_mcp_process`, `_children`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import ByteReceiveStream, Process
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage

from tamesu.net.bounded import Record, too_large_note

ENVELOPE_ROOM = 16 * 1024
"""Bytes a line may have past `max_response_bytes`: the JSON-RPC envelope around an answer of the limit."""
_CHUNK = 65_536
"""Bytes read from stdout at a time (asyncio's stream buffer holds about twice that, then stops reading)."""
_FLUSH = 0.5
"""How long the messages the session already handed over have to reach the server's stdin at shutdown."""
_EXIT_GRACE = 2.0
"""How long the server has to exit by itself once its stdin is closed (the SDK waits as long)."""
_TERM_GRACE = 2.0
"""Between SIGTERM and SIGKILL to its process group."""
_REAP = 2.0
"""For the event loop to see a killed process gone."""
_POLL = 0.01


class Noise(Protocol):
    """Where stdout lines that are not JSON-RPC go, and replies that answer no request waiting for one
    (`connection.StdoutNoise`)."""

    def add(self, line: str) -> None: ...

    def stray(self, request_id: object, waiting: list[object]) -> None: ...


class LineBound:
    """Cuts a byte stream into lines (without their newline), never holding more than `limit` bytes of one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> tuple[list[bytes], tuple[int, int | None] | None]:
        """The lines `chunk` completes, and, when a line passes the limit, how much of it was read and its whole
        length when its end was seen (else None); nothing after that line is given."""
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            size = len(self._partial) + end - start
            if size > self.limit:
                return lines, (size, size)
            if self._partial:
                self._partial += chunk[start:end]
                lines.append(bytes(self._partial))
                self._partial.clear()
            else:
                lines.append(chunk[start:end])
            start = end + 1
        held = len(self._partial) + len(chunk) - start
        if held > self.limit:
            return lines, (held, None)
        self._partial += chunk[start:]
        return lines, None


def parsed(line: bytes, noise: Noise) -> SessionMessage | None:
    """The JSON-RPC message on one line, or None when it is not one (then `noise` has it)."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError: not JSON, or JSON that is no JSON-RPC message
        noise.add(line.decode("utf-8", errors="replace"))
        return None
    return SessionMessage(message)


@asynccontextmanager
async def bounded_stdio(command: str, args: list[str], env: dict[str, str], cwd: Path, stderr: int,
                        noise: Noise, max_bytes: int, refused: Record) -> AsyncIterator[tuple[object, object]]:
    """The server started with exactly `env`; yields the session's (read, write) streams. A stdout line longer
    than `max_bytes` plus `ENVELOPE_ROOM` is refused (`refused` is told) and ends the session."""
    process = await anyio.open_process([command, *args], env=env, cwd=cwd, stderr=stderr, start_new_session=True)
    # no await between the spawn and the task group: a cancellation there would leave the process running
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    sent: set[object] = set()
    """The ids of the requests sent, as the SDK matches them ("7" is 7); a late reply to one is no stray."""
    waiting: dict[object, None] = {}
    """The ids sent and not answered yet, in the order they went."""
    assert process.stdout is not None and process.stdin is not None  # spawned with both pipes
    stdout, stdin = process.stdout, process.stdin

    async def read_stdout() -> None:
        lines = LineBound(max_bytes + ENVELOPE_ROOM)
        try:
            async with to_session:  # closed when this ends: the session then sees the connection gone
                while True:
                    try:
                        chunk = await stdout.receive(_CHUNK)
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        return
                    complete, past = lines.feed(chunk)
                    for line in complete:
                        message = parsed(line, noise)
                        if message is None:
                            continue
                        reply = message.message
                        if isinstance(reply, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError) \
                                and reply.id is not None:
                            if _same_id(reply.id) not in sent:
                                noise.stray(reply.id, list(waiting))
                            waiting.pop(_same_id(reply.id), None)
                        await to_session.send(message)
                    if past is not None:
                        read, whole = past
                        refused(too_large_note(max_bytes, read, whole), read, whole)
                        return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone
        finally:
            await _drain(stdout)

    async def write_stdin() -> None:
        try:
            async with from_session:
                async for message in from_session:
                    if isinstance(message.message, mcp_types.JSONRPCRequest):
                        # before it goes: the answer may be quick
                        sent.add(_same_id(message.message.id))
                        waiting[_same_id(message.message.id)] = None
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(text.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # the server stopped reading (it may still run): the session must see the end, not wait forever
            await to_session.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()  # a reader blocked handing a message over goes on to drain, so the server can exit
        write_stream.close()
        with anyio.move_on_after(_FLUSH):
            await writer_done.wait()
        await _stop(process)
        for stream in (read_stream, write_stream, to_session, from_session):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(read_stdout)
        group.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                await shutdown()
            group.cancel_scope.cancel()


def _same_id(request_id: object) -> object:
    """An id as the SDK correlates it: a stringified int is the int."""
    return coerce_request_id(request_id) if isinstance(request_id, str | int) else request_id


async def _drain(stdout: ByteReceiveStream) -> None:
    """Reads and discards the rest of stdout until it ends or shutdown closes it (shielded: a cancelled
    session still lets a server stuck writing reach its exit)."""
    with anyio.CancelScope(shield=True), suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                                  anyio.BrokenResourceError, OSError):
        while True:
            await stdout.receive(_CHUNK)


async def _stop(process: Process) -> None:
    """Stdin closed, `_EXIT_GRACE` to exit, then SIGTERM and SIGKILL to its process group; stdout closed last
    (a survivor holding it open cannot keep the reader waiting)."""
    assert process.stdin is not None and process.stdout is not None
    await _close(process.stdin)
    if not await _exited(process, _EXIT_GRACE):
        _signal_group(process.pid, signal.SIGTERM)  # the group's id is the leader's pid (a new session)
        if not await _exited(process, _TERM_GRACE):
            _signal_group(process.pid, signal.SIGKILL)
            await _exited(process, _REAP)
    await _close(process.stdout)
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close: Callable[[], None] | None = getattr(transport, "close", None)
    if callable(close):  # the asyncio transport would otherwise stay open while a survivor holds a pipe
        with suppress(PermissionError):
            close()


async def _exited(process: Process, timeout: float) -> bool:
    # returncode, not wait(): asyncio's wait also waits for the pipes to close, which a grandchild may hold
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(_POLL)
        return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _close(stream: Any) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()
