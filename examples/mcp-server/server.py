"""A small shop's MCP server, built on the `mcp` SDK: the system under test of this example.

    python server.py                     # over stdio, as the `shop` target starts it
    python server.py --http --port 8765  # streamable HTTP at http://127.0.0.1:8765/mcp (--port 0: any free
                                         # port; the address is printed as "listening on URL")

Tools: search_products, get_order, refund_order. The data lives in this file and every process starts
afresh, so a refund made in one run is gone in the next.
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PRODUCTS = [
    {"sku": "JKT-RAIN-M", "name": "Rain Jacket", "price_eur": 129.0, "tags": ["jacket", "waterproof", "rain"]},
    {"sku": "JKT-DOWN-L", "name": "Down Jacket", "price_eur": 189.0, "tags": ["jacket", "warm", "winter"]},
    {"sku": "BOOT-HIKE-42", "name": "Hiking Boots", "price_eur": 149.0, "tags": ["boots", "waterproof", "hiking"]},
    {"sku": "SOCK-WOOL-3", "name": "Wool Socks (3 pairs)", "price_eur": 24.0, "tags": ["socks", "warm"]},
]
ORDERS: dict[str, dict[str, Any]] = {
    "ORD-1001": {"order_id": "ORD-1001", "status": "shipped", "carrier": "DHL", "eta": "Friday",
                 "items": ["Rain Jacket"], "total_eur": 129.0},
    "ORD-1002": {"order_id": "ORD-1002", "status": "delivered", "delivered_on": "2026-11-20",
                 "items": ["Hiking Boots"], "total_eur": 149.0},
    "ORD-1003": {"order_id": "ORD-1003", "status": "processing", "items": ["Wool Socks (3 pairs)"],
                 "total_eur": 24.0},
}

server = MCPServer("shop", instructions="Look an order up with get_order before saying anything about it.",
                   log_level="WARNING")


@server.tool()
def search_products(query: str, max_results: int = 3) -> list[dict[str, Any]]:
    """Find products whose name or tags match the words of the query."""
    words = {word.rstrip("s") for word in query.lower().split()}
    found = [p for p in PRODUCTS
             if words & {tag.rstrip("s") for tag in p["tags"]} or any(w in p["name"].lower() for w in words)]
    return found[:max_results]


@server.tool()
def get_order(order_id: str) -> dict[str, Any]:
    """The status, items and total of an order (ids look like ORD-1001)."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order {order_id}")
    return order


@server.tool()
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund a delivered order in full."""
    order = get_order(order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} is {order['status']}; only a delivered order can be refunded")
    order["status"] = "refunded"
    return {"order_id": order["order_id"], "refunded_eur": order["total_eur"], "reason": reason}


def serve_http(port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=8765)
    options = parser.parse_args()
    if options.http:
        serve_http(options.port)
    else:
        server.run()


if __name__ == "__main__":
    main()
