"""Servers for the wire matrix (tests/test_wire_matrix.py), each a real socket on 127.0.0.1: an HTTP(S) server
that answers every request with its request line, an HTTP CONNECT proxy that tunnels and remembers where to,
an agent that answers 413 early and half-closes while the upload is still coming (nginx's lingering close),
and one that resets the connection in the middle of the body."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator


async def _head(reader: asyncio.StreamReader) -> tuple[str, int]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    length = next((int(line.split(":", 1)[1]) for line in head if line.lower().startswith("content-length:")), 0)
    return head[0], length


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            line, length = await _head(reader)
            await reader.readexactly(length)
            body = json.dumps({"text": line, "choices": [{"message": {"role": "assistant", "content": line}}]})
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body.encode()))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def echo_server(context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """Its port; HTTPS with `context`."""
    server = await asyncio.start_server(_echo, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT host:port), remembering each target; `hosts` are names it
    resolves itself (a company's proxy reaches internal names its clients cannot)."""

    def __init__(self, hosts: dict[str, str] | None = None) -> None:
        self.tunnels: list[str] = []
        self.hosts = hosts or {}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line, _ = await _head(reader)
            method, target, _ = line.split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                return
            self.tunnels.append(target)
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(self.hosts.get(host, host), int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        try:
            yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        finally:
            server.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _early_413(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The answer as soon as the head is read, then a half-close; the rest of the upload read and dropped for a
    while (nginx's lingering close), then the connection closed."""
    try:
        await _head(reader)
        body = b'{"error": "request entity too large"}'
        writer.write(b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                while await reader.read(65536):
                    pass
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _reset_mid_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Part of the body read, then a reset (SO_LINGER 0): the agent's process died mid-request."""
    try:
        await _head(reader)
        await reader.read(1024)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    _abort(writer)


WORKED_S = 0.6
"""How long `reset_after_working` works on a request before its reset: past the RESEND_WITHIN its test sets."""


async def _reset_after_working(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The whole request read, worked on for WORKED_S, then a reset: the agent may have acted on it."""
    try:
        _, length = await _head(reader)
        await reader.readexactly(length)
        await asyncio.sleep(WORKED_S)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@contextlib.asynccontextmanager
async def faulty_server(kind: str, connections: list[int] | None = None) -> AsyncIterator[int]:
    """A port whose server is `early_413`, `reset` or `reset_after_working`; each connection accepted is
    appended to `connections`."""
    handler = {"early_413": _early_413, "reset": _reset_mid_body, "reset_after_working": _reset_after_working}[kind]

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections is not None:
            connections.append(len(connections) + 1)
        await handler(reader, writer)

    server = await asyncio.start_server(counted, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
