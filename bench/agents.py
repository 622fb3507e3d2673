"""Agents for the benchmark, each in a process of its own so its CPU never counts as tamesu's.

    python bench/agents.py [--port N]
    POST /chat    answers {"text": "echo: ..."} at once
    POST /sse     streams a first token after FIRST_MS and the last after LAST_MS
    GET /count    how many /chat requests it answered

It prints `listening on http://127.0.0.1:PORT` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

from aiohttp import web

FIRST_MS = 40
LAST_MS = 120
BACKLOG = 4096
"""The listen queue: 1,000 conversations connect at once to each server, twice (model and agent); a queue
shorter than that drops SYNs, and the kernel's retry after 1, 3, 7 s reads as a stalled benchmark."""


served = {"chat": 0}


async def echo(request: web.Request) -> web.Response:
    body = await request.json()
    served["chat"] += 1
    return web.json_response({"text": f"echo: {body.get('message', '')}"})


async def timed(request: web.Request) -> web.StreamResponse:
    await request.read()
    response = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await response.prepare(request)
    await asyncio.sleep(FIRST_MS / 1000)
    await response.write(f"data: {json.dumps({'delta': 'first'})}\n\n".encode())
    await asyncio.sleep((LAST_MS - FIRST_MS) / 1000)
    await response.write(f"data: {json.dumps({'delta': ' last', 'done': True})}\n\n".encode())
    await response.write_eof()
    return response


async def count(_: web.Request) -> web.Response:
    return web.json_response(served)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    serve_forever([("POST", "/chat", echo), ("POST", "/sse", timed), ("GET", "/count", count)], args.port)


def serve_forever(routes: list[tuple[str, str, Handler]], port: int = 0) -> None:
    """Serve `routes` with aiohttp's server (its C HTTP parser: uvicorn here has only h11, pure Python, which at
    1,000 conversations at once made the server, not the client, the bottleneck) on 127.0.0.1 (port 0: a free
    one); print `listening on URL` once ready, until killed."""
    app = web.Application(client_max_size=16 * 1024 * 1024)
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)

    async def serve() -> None:
        # no access log (its formatting is CPU the agent does not need); keep-alive longer than tamesu's idle
        # connections live, so the client, never the server, closes an idle one
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=75, handle_signals=False)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        site = web.SockSite(runner, sock, backlog=BACKLOG)
        await site.start()
        print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
