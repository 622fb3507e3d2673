"""A small support orchestrator over A2A, for tamesu's remote-agents example: it delegates refunds to a
billing agent and tracking to a shipping agent, with a2a-sdk's client.

Run it:  python agent.py --port 8790      (0 picks a free port; the URL is printed)
Point it at its remote agents with BILLING_AGENT_URL and SHIPPING_AGENT_URL (and SHIPPING_AGENT_TOKEN), or per
message with the metadata `billing_url` / `shipping_url`, which is what the example suite does.
"""

from __future__ import annotations

import argparse
import socket

import uvicorn

# Python puts this file's folder first on sys.path, so the package beside it imports from anywhere
from orchestrator_agent.server import app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8790, help="HTTP port (0: a free one)")
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    print(f"orchestrator listening on {origin}/a2a", flush=True)
    server = uvicorn.Server(uvicorn.Config(app(origin), log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
