"""`tamesu view` as a child process for the view tests: started on a free port, stopped after the test; the runs
that fill the store it shows; and `stored`, the start most view tests share (a local agent, a suite against it
run into the store, the view's pages read over HTTP)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from lifeline import tied


def stored_run(root: Path, env: dict[str, str] | None = None, *extra: str) -> subprocess.CompletedProcess[str]:
    """`tamesu run --out out [extra]` in `root` with the project's SQLite store on, the store `tamesu view` reads;
    forked from the warm zygote (tests/forked.py): a plain child spent half a second of CPU importing before it
    ran."""
    return forked.run(["run", "--out", "out", *extra], root, {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": "true",
                                                              **(env or {})}, 120)


class View:
    """A running `tamesu view`: its process and its base URL (no trailing slash)."""

    def __init__(self, root: Path, env: dict[str, str], extra: tuple[str, ...], port: str | None = "0") -> None:
        # a fork of the warm zygote through its launcher (tests/forked.py), SIGINT passed on
        ports = ["--port", port] if port is not None else []
        self.process = subprocess.Popen(tied([*forked.tamesu_command(), "view", *ports, *extra]), cwd=root,
                                        env={**os.environ, "NO_COLOR": "1", **env}, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # the view says where it listens once it does
        if not line.startswith("tamesu view: "):
            self.process.kill()
            self.process.wait()
            raise AssertionError(line + (self.process.stderr.read() if self.process.stderr else ""))
        self.url = line.split()[2].rstrip("/")

    def stop(self) -> None:
        """As Ctrl-C stops it; killed when it does not stop within 10 s."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def view() -> Iterator[Callable[..., View]]:
    """`view(root, *flags, env={}, port="0")` starts `tamesu view` in `root` (`port=None`: no `--port`); every
    view started is stopped after the test."""
    started: list[View] = []

    def start(root: Path, *extra: str, env: dict[str, str] | None = None, port: str | None = "0") -> View:
        started.append(View(root, env or {}, extra, port))
        return started[-1]

    try:
        yield start
    finally:
        for one in started:
            one.stop()


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})


class Stored:
    """A project in `root` whose runs fill the store `tamesu view` reads: `agent`, a local agent answering
    `echo: <message>` at `{agent}/chat` (started when first named); `write` the project and its suite, `run` it
    into the store, `page` one of the view's pages (the view started, with --no-open, at the first)."""

    def __init__(self, root: Path, serve: Callable[[Any], Any], view: Callable[..., View]) -> None:
        self.root = root
        self._serve = serve
        self._view = view
        self._url: str | None = None

    @cached_property
    def agent(self) -> str:
        return str(self._serve(Starlette(routes=[Route("/chat", _echo, methods=["POST"])])).url)

    def write(self, suite: str, project: str = "suites: ['suite.yaml']\n") -> None:
        (self.root / "tamesu.yaml").write_text(project)
        (self.root / "suite.yaml").write_text(suite)

    def run(self, env: dict[str, str] | None = None, *extra: str) -> subprocess.CompletedProcess[str]:
        return stored_run(self.root, env, *extra)

    def page(self, path: str = "/", **params: str) -> str:
        if self._url is None:
            self._url = self._view(self.root, "--no-open").url
        return httpx.get(f"{self._url}{path}", params=params, timeout=30).text


@pytest.fixture
def stored(tmp_path: Path, serve: Callable[[Any], Any], view: Callable[..., View]) -> Stored:
    """`Stored` in the test's `tmp_path`."""
    return Stored(tmp_path, serve, view)
