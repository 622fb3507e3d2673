"""tamesu's own HTTP/1.1 transport (`tamesu.net.h11_transport`), beneath the rest target's client, the remote agents'
forward and their pushes: every way an answer can be framed, every way an exchange can fail (each as the
`httpx` exception its callers handle), the pool's bounds, reading no faster than the caller, TLS, and the
resend's limits. Each test talks to a raw server on 127.0.0.1 that writes the exact bytes under test."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
import trustme

from agents.closing_agent import ClosingAgent
from ports import refused_port
from tamesu.net.clients import os_reason, ssl_context
from tamesu.net.h11_transport import H11Transport, h11_transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Served:
    def __init__(self) -> None:
        self.connections = 0
        self.url = ""


@asynccontextmanager
async def serving(handler: Handler, context: ssl.SSLContext | None = None) -> AsyncIterator[Served]:
    """A raw server running `handler` for each connection it accepts."""
    served = Served()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.connections += 1
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(accepted, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    served.url = f"{'https' if context else 'http'}://{'localhost' if context else '127.0.0.1'}:{port}"
    try:
        yield served
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """One request: its request line and its body (by Content-Length, or chunked)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    line, *fields = head.split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)}
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await reader.readline()).strip(), 16)
            body += await reader.readexactly(size + 2)
            if size == 0:
                return line, body[:-2]
            body = body[:-2]
    return line, await reader.readexactly(int(headers.get("content-length", "0")))


def client(**options: Any) -> httpx.AsyncClient:
    timeout = options.pop("timeout", 10.0)
    return httpx.AsyncClient(transport=H11Transport(verify=options.pop("verify", ssl_context()), **options),
                             timeout=timeout)


async def test_answers_of_every_framing_are_read_whole_on_one_kept_connection() -> None:
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\nX-Sum: 7\r\n\r\n",
               b"HTTP/1.1 204 No Content\r\n\r\n",
               b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"]  # to HEAD: the length, and no body

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await read_request(reader)
            writer.write(answer)
            await writer.drain()

    async with serving(handler) as served, client() as http:
        got = [await http.get(f"{served.url}/a"), await http.post(f"{served.url}/b", json={"x": 1}),
               await http.delete(f"{served.url}/c"), await http.head(f"{served.url}/d")]
    assert [(r.status_code, r.content) for r in got] == [(200, b"hello"), (200, b"abcdefg"), (204, b""),
                                                          (200, b"")]
    assert got[0].http_version == "HTTP/1.1" and got[0].reason_phrase == "OK"
    assert served.connections == 1


async def test_an_answer_that_ends_with_its_connection_is_read_whole_and_the_connection_not_kept() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        await writer.drain()

    async with serving(handler) as served, client() as http:
        first = await http.get(served.url)
        second = await http.get(served.url)
    assert first.content == second.content == b"until the end"
    assert served.connections == 2


async def test_informational_answers_are_passed_over_for_the_real_one() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
                     b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    async with serving(handler) as served, client() as http:
        answer = await http.post(served.url, content=b"x")
    assert (answer.status_code, answer.text) == (201, "ok")


async def test_a_streamed_request_body_goes_out_chunked_and_whole() -> None:
    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, body = await read_request(reader)
        received.append(body)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async def pieces() -> AsyncIterator[bytes]:
        for n in range(3):
            yield f"piece {n};".encode() * 1000

    async with serving(handler) as served, client() as http:
        assert (await http.post(served.url, content=pieces())).status_code == 200
    assert received == [b"".join(f"piece {n};".encode() * 1000 for n in range(3))]


async def test_an_answer_cut_short_is_a_protocol_error_and_a_reset_a_read_error_naming_the_reason() -> None:
    async def short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        await asyncio.sleep(0.1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async with serving(short) as served, client() as http:
        with pytest.raises(httpx.RemoteProtocolError, match="peer closed connection without sending complete"):
            await http.get(served.url)
    async with serving(reset) as served, client() as http:
        with pytest.raises(httpx.ReadError) as caught:
            await http.get(served.url)
    assert os_reason(caught.value) == "Connection reset by peer"


async def test_a_silent_agent_times_out_at_the_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    async with serving(silent) as served, client(timeout=httpx.Timeout(10, read=0.3)) as http:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            await http.get(served.url)
        # 0.3 s asked for; a transport that ignored it would wait for the server's 30 s
        assert 0.25 <= time.monotonic() - started < 5


async def test_a_refused_connection_is_a_connect_error_with_the_systems_reason() -> None:
    async with client() as http:
        with pytest.raises(httpx.ConnectError) as caught:
            await http.get(f"http://127.0.0.1:{refused_port()}/")
    assert os_reason(caught.value) == "Connection refused"


async def test_requests_past_max_connections_wait_and_give_up_at_the_pool_timeout() -> None:
    release = asyncio.Event()

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _ = await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
            await writer.drain()
            if "/held" in line:
                await release.wait()
            writer.write(b"done")
            await writer.drain()

    async with serving(held) as served, client(max_connections=1, timeout=httpx.Timeout(10, pool=0.2)) as http:
        request = http.build_request("GET", f"{served.url}/held")
        first = await http.send(request, stream=True)
        with pytest.raises(httpx.PoolTimeout):
            await http.get(f"{served.url}/other")
        release.set()
        assert await first.aread() == b"done"
        await first.aclose()
        assert (await http.get(f"{served.url}/other")).content == b"done"
    assert served.connections == 1  # the answer read to its end gave its connection back


async def test_an_agent_that_sends_without_end_is_read_no_faster_than_the_caller_reads() -> None:
    sent = {"bytes": 0}
    piece = b"x" * (1 << 20)

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        while sent["bytes"] < 512 << 20:
            writer.write(piece)
            await writer.drain()
            sent["bytes"] += len(piece)

    async with serving(endless) as served, client() as http, http.stream("GET", served.url) as answer:
        chunks = answer.aiter_raw()
        first = await chunks.__anext__()
        await asyncio.sleep(1.0)  # the caller reads nothing more for a second
        taken = sent["bytes"]
    assert first
    # what the sockets' buffers hold plus the transport's quarter of a MiB; unpaused, a second of loopback
    # carries hundreds of MiB
    assert taken < 64 << 20, taken


async def test_an_idle_connection_the_agent_closed_or_left_too_long_is_never_used_again() -> None:
    async def answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()  # kept alive as far as the headers say, then closed by the server

    resent: list[str] = []
    async with serving(answer_then_close) as served, client(on_resend=lambda _r, why: resent.append(why)) as http:
        assert (await http.get(served.url)).content == b"ok"
        await asyncio.sleep(0.2)
        assert (await http.get(served.url)).content == b"ok"
    assert served.connections == 2 and resent == []  # known closed before the request: nothing to send again

    async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with serving(keep_alive) as served, client(keepalive_expiry=0.1) as http:
        await http.get(served.url)
        await http.get(served.url)
        await asyncio.sleep(0.3)
        await http.get(served.url)
    assert served.connections == 2


async def test_a_cancelled_request_leaves_no_connection_and_no_slot_behind() -> None:
    answered = asyncio.Event()

    async def slow_then_fast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _ = await read_request(reader)
            if "/slow" in line:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
                await writer.drain()
                answered.set()
                await asyncio.sleep(30)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    transport = H11Transport(verify=ssl_context(), max_connections=1)
    async with serving(slow_then_fast) as served, httpx.AsyncClient(transport=transport, timeout=10) as http:
        slow = asyncio.create_task(http.get(f"{served.url}/slow"))
        await answered.wait()
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert (await http.get(f"{served.url}/fast")).content == b"ok"  # the one slot is free again
    assert served.connections == 2  # the half-read connection was dropped, not reused


async def test_https_with_a_trusted_certificate_and_refused_with_any_other() -> None:
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server_context)
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
            await writer.drain()

    async with serving(answer, server_context) as served:
        async with client(verify=trusting) as http:
            assert [(await http.get(served.url)).text for _ in range(2)] == ["secret", "secret"]
        async with client() as http:  # the public trust store does not know this authority
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.get(served.url)
    assert served.connections == 1  # both trusted requests on one connection; the refused handshake never got in


async def test_a_dropped_request_is_sent_again_once_only_when_its_body_is_in_memory() -> None:
    resent: list[str] = []

    async def streamed() -> AsyncIterator[bytes]:
        yield b'{"message": "two"}'

    with ClosingAgent(drop_nth=2) as agent:
        async with client(on_resend=lambda _r, why: resent.append(why)) as http:
            await http.post(f"{agent.url}/chat", json={"message": "one"})
            with pytest.raises(httpx.RemoteProtocolError, match="Server disconnected without sending a response"):
                await http.post(f"{agent.url}/chat", content=streamed(), headers={"Content-Length": "18"})
            assert resent == []
            answer = await http.post(f"{agent.url}/chat", json={"message": "three"})
            await http.post(f"{agent.url}/chat", json={"message": "four"})  # dropped on the kept connection
        assert answer.json() == {"text": "echo: three"}
        assert agent.dropped == ["two", "four"] and agent.answered == ["one", "three", "four"]
    assert resent == ["the agent had closed the kept-alive connection (Server disconnected without sending a "
                      "response.)"]


async def test_beneath_httpx2_the_answers_and_the_failures_are_httpx2s() -> None:
    # the model providers' transport client is httpx2's (the SDKs' module): the same transport, its classes
    async def answer_then_hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _ = await read_request(reader)
        if "/hold" not in line:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            await writer.drain()
            line, _ = await read_request(reader)
        await asyncio.sleep(30)

    transport = h11_transport(httpx2, verify=ssl_context())
    assert isinstance(transport, httpx2.AsyncBaseTransport)
    async with serving(answer_then_hold) as served, \
            httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(10, read=0.3)) as http:
        answer = await http.post(f"{served.url}/chat", json={"model": "m"})
        assert (answer.status_code, answer.json()) == (200, {})
        with pytest.raises(httpx2.ReadTimeout):
            await http.post(f"{served.url}/hold", json={})
        with pytest.raises(httpx2.ConnectError):
            await http.get(f"http://127.0.0.1:{refused_port()}/")
    assert served.connections == 1


async def test_an_agent_that_switches_protocols_fails_the_request_in_one_line() -> None:
    async def switches(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(30)

    async with serving(switches) as served, client(timeout=5) as http:
        started = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError, match="switched to another protocol"):
            await http.get(served.url, headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        assert time.monotonic() - started < 4  # said at once, not spun on nor waited out


async def test_a_request_the_agent_does_not_read_times_out_at_the_write_timeout() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the head only: the body is never read
        await asyncio.sleep(30)

    async with serving(deaf) as served, client(timeout=httpx.Timeout(10, write=0.5)) as http:
        started = time.monotonic()
        with pytest.raises(httpx.WriteTimeout):
            await http.post(served.url, content=b"x" * (32 << 20))  # far more than the sockets' buffers hold
        assert time.monotonic() - started < 5
