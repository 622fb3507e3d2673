"""MCP servers for the mcp target's tests, started as real processes: `python mcp_servers.py MODE [--http]`.

Modes:
- `tools` (default): tools that answer, fail, hang, crash the process or read the environment, plus a tool
  `ghost` that is listed but unknown when called (a server whose listing and handler disagree).
- `crash`: writes a reason to stderr and exits 3 before answering anything.
- `mute`: starts and never answers (the handshake hangs).
- `noisy`: like `tools`, after printing `--noise N` lines of chatter on stdout (where only JSON-RPC belongs).

`--http --port 0` serves streamable HTTP at /mcp on a free port and prints `listening on URL` (`--sse`: MCP's older
HTTP+SSE transport instead, its URL then ending in /sse); `--token T`
makes every HTTP request need `Authorization: Bearer T`. Every tool call is appended to `--log FILE` (one
name per line), so a test can prove what reached the server; `--traces FILE` appends, for each call of
`get_order` and `search_docs`, a JSON line with the `traceparent` of its `_meta` and of its HTTP request
(null when absent), as an instrumented server would read them. `--say-env NAME` writes `NAME=value` to stderr
as it starts, as a server logging its configuration does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context  # at the top: the SDK reads a tool's annotations in these globals

DOCS = {
    "returns": "Returns are accepted within 30 days of delivery. Refunds reach the card in 5 business days.",
    "shipping": "Standard shipping takes 3 to 5 business days and is free above 50 euros.",
}
ORDERS = {"ORD-1001": {"order_id": "ORD-1001", "status": "shipped", "eta": "Friday"}}


def build(log: Path | None, traces: Path | None = None) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import Tool

    def record(name: str, ctx: Context | None = None) -> None:
        if log is not None:
            with log.open("a", encoding="utf-8") as out:
                out.write(name + "\n")
        if traces is not None and ctx is not None:
            meta = ctx.request_context.meta or {}
            headers = ctx.headers or {}
            line = {"tool": name, "meta": meta.get("traceparent"), "header": headers.get("traceparent")}
            with traces.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")

    class ListsAGhost(MCPServer):
        """Lists a tool it has no handler for, so calling it answers "Unknown tool"."""

        async def list_tools(self) -> list[Tool]:
            ghost = Tool(name="ghost", description="Listed, but not there", input_schema={"type": "object"})
            return [*await super().list_tools(), ghost]

    server = ListsAGhost("testshop", instructions="Always look an order up before talking about it.",
                         log_level="WARNING")

    @server.tool()
    def search_docs(query: str, ctx: Context) -> str:
        """Search the help centre."""
        record("search_docs", ctx)
        if query == "everything":  # an answer of 300 kB, past a target's max_response_bytes in the tests
            return "z" * 300_000
        hits = [text for key, text in DOCS.items() if key in query.lower()]
        return "\n".join(hits) or "no document matches"

    @server.tool()
    def get_order(order_id: str, ctx: Context) -> dict[str, Any]:
        """Look an order up by its id."""
        record("get_order", ctx)
        if order_id not in ORDERS:
            raise ToolError(f"no order {order_id}")
        return ORDERS[order_id]

    @server.tool()
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        record("refund_order")
        return f"refunded {order_id}"

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        record("hang")
        await anyio.sleep(3600)
        return "too late"

    @server.tool()
    def crash() -> str:
        """Kills the server."""
        record("crash")
        print("fatal: the tool crashed the server", file=sys.stderr, flush=True)
        os._exit(9)

    @server.tool()
    def read_env(name: str) -> str:
        """An environment variable of the server, or <unset>."""
        record("read_env")
        return os.environ.get(name, "<unset>")

    return server


def serve_http(server: Any, port: int, token: str | None, limit: int = 0, sse: bool = False) -> None:
    import socket

    import uvicorn

    app = server.sse_app() if sse else server.streamable_http_app()
    refused = [0]

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and refused[0] < limit:
            # a gateway's rate limit: the first `limit` requests are refused, asked to come back in 0.1 s
            refused[0] += 1
            await send({"type": "http.response.start", "status": 429, "headers": [(b"retry-after", b"0.1")]})
            await send({"type": "http.response.body", "body": b"too many requests"})
            return
        if token and scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != \
                f"Bearer {token}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # listening before the address is printed: a client that connects at once waits in the backlog until
    # uvicorn accepts, rather than being refused (a proxy in front of it cannot retry as the mcp target does)
    sock.listen(128)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/{'sse' if sse else 'mcp'}", flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", nargs="?", default="tools", choices=["tools", "crash", "mute", "noisy"])
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--sse", action="store_true", help="with --http: MCP's older HTTP+SSE transport (GET /sse)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    parser.add_argument("--limit", type=int, default=0, help="POSTs refused with 429 before the server answers")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--traces", type=Path)
    parser.add_argument("--noise", type=int, default=25, help="lines a `noisy` server prints before it speaks MCP")
    parser.add_argument("--say-env", help="an environment variable written to stderr as NAME=value at start")
    options = parser.parse_args()
    if options.say_env:
        print(f"{options.say_env}={os.environ.get(options.say_env, '<unset>')}", file=sys.stderr, flush=True)
    if options.mode == "crash":
        print("boom: the database is unreachable", file=sys.stderr, flush=True)
        sys.exit(3)
    if options.mode == "mute":
        time.sleep(3600)
        return
    server = build(options.log, options.traces)
    if options.mode == "noisy":
        # a server that prints its own chatter on stdout, where only JSON-RPC belongs
        for number in range(options.noise):
            print(f"DEBUG loading plugin {number}", flush=True)
    if options.http:
        serve_http(server, options.port, options.token, options.limit, options.sse)
    else:
        server.run()


if __name__ == "__main__":
    main()
