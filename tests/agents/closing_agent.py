"""An HTTP/1.1 agent that keeps connections alive and then drops one request on them, as a server whose
keep-alive time ran out drops the request that arrives just then: the `drop_nth` request of each connection is
read whole and never answered (the connection ends with a FIN, or a reset with `reset=True`). Every other
request gets `{"text": "echo: <message>"}`. A raw socket server, since no ASGI server drops a request it read.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import struct
import threading
from typing import Any


class ClosingAgent:
    def __init__(self, *, drop_nth: int = 2, reset: bool = False) -> None:
        self.drop_nth = drop_nth
        self.reset = reset
        self.answered: list[str] = []
        """The messages answered, in order."""
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
                    message = str(request.get("message", ""))
                    if number == agent.drop_nth:
                        with agent._lock:
                            agent.dropped.append(message)
                        if agent.reset:  # closed at once with SO_LINGER 0: a reset, not socketserver's FIN
                            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            os.close(self.connection.detach())
                        return
                    with agent._lock:
                        agent.answered.append(message)
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

    def __enter__(self) -> ClosingAgent:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _read_request(rfile: Any) -> dict[str, Any] | None:
    """One request's JSON body (its headers read and dropped), or None when the client closed."""
    length = 0
    line = rfile.readline(65536)
    if not line:
        return None
    while True:
        line = rfile.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = rfile.read(length) if length else b""
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {"message": body.decode("utf-8", "replace")}
    return parsed if isinstance(parsed, dict) else {"message": str(parsed)}
