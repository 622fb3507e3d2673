"""A small shop agent over A2A, for tamesu's A2A example: order status, returns, photos of the damage, and an
order history for signed-in customers. Built on a2a-sdk's server side, it speaks A2A 1.0 and 0.3 on JSON-RPC,
HTTP+JSON and gRPC at once, streams its answers word by word, pushes finished tasks to a client's URL, and keeps
tasks so a client can read them again or resubscribe.

Run it:  python agent.py --port 8770 --grpc-port 8771     (0 picks free ports; the URLs are printed)
The extended card and the order history need  Authorization: Bearer $SHOP_A2A_TOKEN  (default demo-token).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

# Python puts this file's folder first on sys.path, so the shop's package beside it imports from anywhere
from shop_agent.server import Settings, ShopServer


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8770, help="HTTP port: card, JSON-RPC, HTTP+JSON (0: free)")
    parser.add_argument("--grpc-port", type=int, default=8771, help="gRPC port (0: free)")
    parser.add_argument("--word-delay", type=float, default=0.02,
                        help="seconds between the words of a streamed answer (default 0.02)")
    parser.add_argument("--protocol", choices=["both", "1.0", "0.3"], default="both",
                        help="the A2A versions the card offers (default both; the servers always answer both)")
    return parser.parse_args()


async def _serve(settings: Settings) -> None:
    # Both servers stop on SIGINT or SIGTERM. While it serves, uvicorn catches these signals itself, ends its
    # server and passes them on to the handlers below when it is done, so whichever ends first, stop() runs.
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    shop = await ShopServer(settings).start()
    endpoints = shop.endpoints
    assert endpoints is not None
    print(f"a2a shop agent listening on {endpoints.jsonrpc} (JSON-RPC, A2A 1.0 and 0.3)", flush=True)
    offered = " and ".join(settings.versions)
    print(f"  card       {shop.origin}/.well-known/agent-card.json (offers A2A {offered})", flush=True)
    print(f"  HTTP+JSON  {endpoints.rest} (A2A 1.0; 0.3 under {endpoints.rest}/v1)", flush=True)
    print(f"  gRPC       grpc://{endpoints.grpc_host}:{endpoints.grpc_port} (A2A 1.0 and 0.3)", flush=True)
    waiting = asyncio.create_task(stopping.wait())
    serving = asyncio.create_task(shop.wait())
    try:
        await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        serving.cancel()  # only the wait: the server itself is shielded and stopped just below
        await shop.stop()


def main() -> None:
    args = _arguments()
    token = os.environ.get("SHOP_A2A_TOKEN") or "demo-token"
    versions = ("1.0", "0.3") if args.protocol == "both" else (args.protocol,)
    asyncio.run(_serve(Settings(token=token, word_delay=args.word_delay, http_port=args.port,
                                grpc_port=args.grpc_port, versions=versions)))
    # Stopped cleanly: both servers are closed and their work is done. What would follow is the interpreter's
    # teardown of a2a-sdk's, gRPC's and protobuf's modules, a garbage collection over every object they made,
    # which took 1.5-4 s at load 15 and kept a SIGTERM'd agent alive past 15 s on a busier machine. Nothing in
    # it needs doing, so flush what was printed and leave.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
