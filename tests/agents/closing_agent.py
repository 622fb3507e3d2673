"""An HTTP/1.1 agent that keeps connections alive and then drops one request on them, as a server whose
keep-alive time ran out drops the request that arrives just then: the `drop_nth` request of each connection is
read whole and never answered (the connection ends with a FIN, or a reset with `reset=True`). Every other
request gets `{"text": "echo: <message>"}`, or, with `forward_to` (an origin), is forwarded there on a
connection of its own and its answer relayed as it comes (chunk by chunk when the origin streams it, so an
event stream passes): a dropping reverse proxy in front of a real server, such as the MCP test server.
`drops` limits how many requests are dropped in all (None: every `drop_nth` one). A raw socket server, since
no ASGI server drops a request it read.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import socketserver
import struct
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_NOT_FORWARDED = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})
_UPSTREAM_TIMEOUT = 60.0
"""Between two reads of the origin's answer: a test's event stream is never idle that long."""


@dataclass
class Request:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def message(self) -> str:
        """The echo agent's `message`; for a JSON-RPC post, its `method`; else the HTTP method."""
        try:
            parsed = json.loads(self.body) if self.body else None
        except ValueError:
            return self.body.decode("utf-8", "replace")
        if isinstance(parsed, dict):
            return str(parsed.get("message", parsed.get("method", self.method)))
        return self.method if parsed is None else str(parsed)


class ClosingAgent:
    def __init__(self, *, drop_nth: int = 2, reset: bool = False, forward_to: str | None = None,
                 drops: int | None = None) -> None:
        self.drop_nth = drop_nth
        self.reset = reset
        self.forward_to = forward_to
        self.drops = drops
        self.answered: list[str] = []
        """The messages answered (or forwarded), in order."""
        self.dropped: list[str] = []
        """The messages read and dropped with their connection."""
        self.connections = 0
        self._lock = threading.Lock()
        agent = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with agent._lock:
                    agent.connections += 1
                number = 0
                while True:
                    request = _read_request(self.rfile)
                    if request is None:
                        return
                    number += 1
                    message = request.message
                    if agent._drops(number):
                        with agent._lock:
                            agent.dropped.append(message)
                        if agent.reset:  # closed at once with SO_LINGER 0: a reset, not socketserver's FIN
                            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            os.close(self.connection.detach())
                        return
                    with agent._lock:
                        agent.answered.append(message)
                    if agent.forward_to is not None:
                        _forward(request, agent.forward_to, self.wfile)
                        continue
                    body = json.dumps({"text": f"echo: {message}"}).encode()
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                    self.wfile.flush()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def _drops(self, number: int) -> bool:
        with self._lock:
            return number == self.drop_nth and (self.drops is None or len(self.dropped) < self.drops)

    def __enter__(self) -> ClosingAgent:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _read_request(rfile: Any) -> Request | None:
    """One request, read whole, or None when the client closed."""
    line = rfile.readline(65536)
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: list[tuple[str, str]] = []
    length = 0
    while True:
        line = rfile.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return Request(method, path, headers, rfile.read(length) if length else b"")


def _forward(request: Request, origin: str, wfile: Any) -> None:
    """`request` sent on to `origin`, its answer written back: as it came when it said its length, else in
    chunks as they arrive."""
    parts = urlsplit(origin)
    upstream = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=_UPSTREAM_TIMEOUT)
    try:
        upstream.request(request.method, request.path, body=request.body or None,
                         headers={k: v for k, v in request.headers if k.lower() not in _NOT_FORWARDED})
        answer = upstream.getresponse()
        length = answer.getheader("content-length")
        head = [f"HTTP/1.1 {answer.status} {answer.reason}"]
        head += [f"{k}: {v}" for k, v in answer.getheaders() if k.lower() not in _NOT_FORWARDED]
        if length is not None:
            body = answer.read()
            wfile.write(("\r\n".join([*head, f"Content-Length: {len(body)}"]) + "\r\n\r\n").encode("latin-1") + body)
            wfile.flush()
            return
        wfile.write(("\r\n".join([*head, "Transfer-Encoding: chunked"]) + "\r\n\r\n").encode("latin-1"))
        wfile.flush()
        while chunk := answer.read1(65536):
            wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            wfile.flush()
        wfile.write(b"0\r\n\r\n")
        wfile.flush()
    finally:
        upstream.close()
