"""Agents for the benchmark, each in a process of its own so its CPU never counts as tamesu's.

    python bench/agents.py --kind echo   POST /chat answers {"text": "echo: ..."} at once
    python bench/agents.py --kind timed  POST /sse streams a first token after FIRST_MS and the last after LAST_MS
    GET /count                           how many /chat requests it answered

It prints `listening on http://127.0.0.1:PORT` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

FIRST_MS = 40
LAST_MS = 120


served = {"chat": 0}


async def echo(request: Request) -> Response:
    body = await request.json()
    served["chat"] += 1
    return JSONResponse({"text": f"echo: {body.get('message', '')}"})


async def timed(request: Request) -> Response:
    await request.body()

    async def events() -> Any:
        await asyncio.sleep(FIRST_MS / 1000)
        yield f"data: {json.dumps({'delta': 'first'})}\n\n"
        await asyncio.sleep((LAST_MS - FIRST_MS) / 1000)
        yield f"data: {json.dumps({'delta': ' last', 'done': True})}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def count(_: Request) -> Response:
    return JSONResponse(served)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    app = Starlette(routes=[Route("/chat", echo, methods=["POST"]), Route("/sse", timed, methods=["POST"]),
                            Route("/count", count)])
    serve_forever(app, args.port)


def serve_forever(app: Any, port: int = 0) -> None:
    """Serve `app` on 127.0.0.1 (port 0: a free one), print `listening on URL` once ready, until killed."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off", backlog=4096, limit_concurrency=None))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                return
            await asyncio.sleep(0.02)
        bound = server.servers[0].sockets[0].getsockname()[1]
        print(f"listening on http://127.0.0.1:{bound}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
