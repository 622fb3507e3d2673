"""A streamable-HTTP MCP server (plain JSON answers, standard library only) with faulty tools: `refund`, the first
time, acts (its count in `refunds.txt` in FOLDER) and then drops the connection without answering (a client that
sends the call again makes the refund twice); `five` answers HTTP 500 and `unauth` HTTP 401, with no JSON-RPC;
`stray_json` answers under an id 1000 past the request's (a JSON body), `stray_sse` the same in an event stream.

    python mcp_http_faults.py PORT FOLDER
"""

from __future__ import annotations

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FOLDER = Path(sys.argv[2])
refunds = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, message: dict) -> None:
        data = json.dumps(message).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        global refunds
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:  # a notification
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        result: dict = {}
        if message["method"] == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "bank", "version": "1"}}
        elif message["method"] == "tools/list":
            result = {"tools": [{"name": name, "inputSchema": {"type": "object",
                                                               "properties": {"id": {"type": "string"}}}}
                                for name in ("refund", "five", "unauth", "stray_json", "stray_sse")]}
        elif message["method"] == "tools/call" and message["params"]["name"] in ("five", "unauth"):
            status, data = (500, b"internal boom") if message["params"]["name"] == "five" else (401, b"expired")
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        elif message["method"] == "tools/call" and message["params"]["name"].startswith("stray_"):
            stray = {"jsonrpc": "2.0", "id": message["id"] + 1000,
                     "result": {"content": [{"type": "text", "text": "an answer to some other call"}]}}
            if message["params"]["name"] == "stray_json":
                self._answer(stray)
                return
            data = f"event: message\ndata: {json.dumps(stray)}\n\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        elif message["method"] == "tools/call":
            refunds += 1
            (FOLDER / "refunds.txt").write_text(str(refunds))
            if refunds == 1:
                time.sleep(0.3)
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            result = {"content": [{"type": "text", "text": f"refunded ({refunds})"}]}
        self._answer({"jsonrpc": "2.0", "id": message["id"], "result": result})


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
