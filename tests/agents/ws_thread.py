"""The websocket agents written for the tests run the same way: a `websockets` server on 127.0.0.1 and a free
port, on an event loop of its own in a daemon thread, so that a synchronous test (and the tamesu process it
starts) talks to it as to any server. A subclass writes `_handler`, and `_http` to answer plain HTTP."""

from __future__ import annotations

import asyncio
import threading

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response


class ThreadedWebsocketServer:
    def __init__(self, name: str, *, start_timeout: float = 10.0) -> None:
        """Serving once this returns (`url`, `port`); `start_timeout` bounds `_prepare` too."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=name)
        self._thread.start()

        async def start() -> Server:
            await self._prepare()
            return await serve(self._handler, "127.0.0.1", 0, ping_interval=None, process_request=self._http)

        self.server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(start_timeout)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}"

    async def _prepare(self) -> None:
        """Work before serving, on the server's loop."""

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        """A plain HTTP answer to `request`, or None to go on with the websocket handshake."""
        return None

    async def _handler(self, ws: ServerConnection) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
