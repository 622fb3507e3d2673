"""A stdio MCP server written by hand, for answers the SDK's server would build whole in memory:
`python mcp_flood.py`.

It speaks just enough MCP (initialize, tools/list, tools/call) for the mcp target. Its tool `flood` answers
with one JSON-RPC line whose text is `megabytes` MB of "z", written to stdout in 1 MB pieces, so the server
itself never holds it; `ping` answers "pong". Each call is appended to `--log FILE` when given; `--listing-kb N`
gives `ping` a description of N kB, so the tools/list answer itself is large.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

_PIECE = b"z" * 1_000_000
TOOLS = [
    {"name": "flood", "description": "An answer of `megabytes` MB",
     "inputSchema": {"type": "object", "properties": {"megabytes": {"type": "integer"}},
                     "required": ["megabytes"]}},
    {"name": "ping", "description": "Answers pong", "inputSchema": {"type": "object"}},
]


def send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def flood(out: Any, request_id: Any, megabytes: int) -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1]
    out.write(head.encode() + b', "result": {"content": [{"type": "text", "text": "')
    for _ in range(megabytes):
        out.write(_PIECE)
    out.write(b'"}], "isError": false}}\n')
    out.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", type=Path)
    parser.add_argument("--listing-kb", type=int, default=0)
    options = parser.parse_args()
    if options.listing_kb:
        TOOLS[1]["description"] = "p" * options.listing_kb * 1000
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification (initialized, cancelled): nothing to answer
        if method == "initialize":
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "1"}}})
        elif method == "tools/list":
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = message["params"]["name"]
            if options.log is not None:
                with options.log.open("a", encoding="utf-8") as log:
                    log.write(name + "\n")
            if name == "flood":
                flood(out, request_id, int(message["params"]["arguments"]["megabytes"]))
            else:
                send(out, {"jsonrpc": "2.0", "id": request_id,
                           "result": {"content": [{"type": "text", "text": "pong"}], "isError": False}})
        else:
            send(out, {"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
