"""Serving an ASGI app on 127.0.0.1 for as long as it is needed, in this loop or in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

EVERY_INTERFACE = frozenset({"0.0.0.0", ""})
"""A bind host that means every IPv4 interface: a server bound so is no address to call it at."""


def reachable_host(host: str) -> str:
    """The host to give a caller of a server bound to `host`: 127.0.0.1 for every interface (0.0.0.0 is no
    address to call: Windows refuses to connect to it, browsers block it), the bound host otherwise."""
    return "127.0.0.1" if host in EVERY_INTERFACE else host


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # without it every keep-alive answer waits ~40 ms for a delayed ACK, which turn latencies would show
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers alone.

    `Server.serve` replaces SIGINT and SIGTERM with its own handlers for as long as it runs and restores the
    previous ones when it stops; servers that overlap (remote agents and listeners of parallel runs) then
    restore each other's handlers in the wrong order, and a signal only stops one server instead of the run.
    The run's owner (`tamesu.runtime.signals`) decides what a signal does; a server is stopped with `exit_now`.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.answering: dict[asyncio.Task[Any], Any] = {}
        """The HTTP requests being answered, each with its uvicorn request cycle (`_yielding`)."""
        self.cut: set[asyncio.Task[Any]] = set()
        """The ones `_cut_unheard` cancelled."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # older uvicorn
        return

    async def main_loop(self) -> None:
        """uvicorn's loop (`on_tick` every 0.1 s), which `exit_now` wakes: uvicorn reads `should_exit` only after
        each 0.1 s sleep, so every stop waited some 50 ms for nothing (a run stops its listeners and remote
        agents, a test suite hundreds of agents)."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def exit_now(self) -> None:
        """Stop serving, from any thread, without waiting for the next tick."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # its loop has closed: it has stopped already
                loop.call_soon_threadsafe(wake.set)

    async def _cut_unheard(self) -> None:
        """Cancel, while uvicorn's shutdown waits, each request whose client has gone before its answer was
        complete: no one can read it, and uvicorn waited the whole grace (2 s) for it, then logged it as an
        exception (a test's server whose client, a tamesu run, was stopped mid-request; a remote agent the
        orchestrator under test hung up on)."""
        while True:
            for task, cycle in list(self.answering.items()):
                if getattr(cycle, "disconnected", False) and not getattr(cycle, "response_complete", True):
                    self.cut.add(task)
                    task.cancel()
            await asyncio.sleep(0.02)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.server_state.connections or self.server_state.tasks:
            cutting = asyncio.create_task(self._cut_unheard())
            try:
                await super().shutdown(sockets)  # uvicorn's: open connections and requests get 0.1 s and more
            finally:
                cutting.cancel()
            return
        # nothing to let finish: uvicorn's own shutdown would wait 0.1 s all the same
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        if not self.force_exit:
            await self.lifespan.shutdown()


def _yielding(app: Any, server: QuietServer) -> Any:
    """`app` whose HTTP sends each give the event loop a turn, its requests in `server.answering` as it answers
    them.

    uvicorn's send returns at once while the socket takes the bytes, and silently once the client has gone: a
    response body that never waits (an endless generator, `while True: yield chunk`) held the loop for good. The
    client's close was never read, so every write after it was asyncio's `socket.send() raised exception.`
    (some 267,000 lines in one CI log), and the server could not be stopped. One turn a send lets the close be
    seen and the server's shutdown cancel the response."""

    async def served(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return

        async def send_and_yield(message: Any) -> None:
            await send(message)
            await asyncio.sleep(0)

        task = asyncio.current_task()
        if task is not None:  # uvicorn's request cycle, which knows whether the client has gone
            server.answering[task] = getattr(receive, "__self__", None)
        try:
            await app(scope, receive, send_and_yield)
        except asyncio.CancelledError:
            if task is None or task not in server.cut:
                raise
            task.uncancel()  # cut by the shutdown, its client gone: an end, not an exception of the app
        finally:
            if task is not None:
                server.answering.pop(task, None)
                server.cut.discard(task)

    return served


def _server(app: Any, grace: int = 2, http: type[asyncio.Protocol] | None = None) -> QuietServer:
    # log_config=None: uvicorn would install its own stderr handlers; its records go where the run says
    # (tamesu.engine.runlog: the run folder's tamesu.log)
    config = uvicorn.Config(app, log_level="warning", log_config=None, lifespan="off",
                            access_log=False, timeout_graceful_shutdown=grace, http=http or "auto")
    server = QuietServer(config)
    config.app = _yielding(app, server)
    return server


class LoopServer:
    """An app served by a task of the running event loop; `stop` waits for it to finish."""

    def __init__(self, app: object, host: str = "127.0.0.1", port: int = 0, *, grace: int = 2,
                 http: type[asyncio.Protocol] | None = None) -> None:
        """`grace`: the seconds `stop` lets requests still being answered finish before cancelling them; `http`:
        uvicorn's protocol class for each connection, when not its own."""
        self._app = app
        self._sock = bind_socket(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = _server(app, grace, http)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Where to call it (`reachable_host`); `host` is where it is bound."""
        return f"http://{reachable_host(self.host)}:{self.port}"

    async def start(self) -> LoopServer:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        for _ in range(200):
            if self._server.started or self._task.done():
                break
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()
        return self

    async def stop(self) -> None:
        self._server.exit_now()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        self._sock.close()


_STOP_S = 5.0
"""How long `ThreadServer.stop` waits for the server's thread: past its shutdown's grace for open requests."""


class ThreadServer:
    """An app served from a thread of its own, for tests and demos that are not async."""

    def __init__(self, app: object, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = bind_socket(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = _server(app)
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        """Where to call it (`reachable_host`); `host` is where it is bound."""
        return f"http://{reachable_host(self.host)}:{self.port}"

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def start(self) -> ThreadServer:
        self._thread.start()
        for _ in range(500):
            if self._server.started or not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        if not self._server.started:
            raise RuntimeError("the server did not start")
        return self

    def stop(self) -> None:
        """Stop serving; a server whose thread does not end within `_STOP_S` is said (RuntimeError), not left
        running unseen."""
        self._server.exit_now()
        self._thread.join(timeout=_STOP_S)
        if self._thread.is_alive():  # its socket is the server's to close as it ends: closed under it, it fails
            raise RuntimeError(f"the server at {self.url} did not stop within {_STOP_S:g} s (a request it is still "
                               "answering holds its event loop)")
        self._sock.close()

    def __enter__(self) -> ThreadServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
