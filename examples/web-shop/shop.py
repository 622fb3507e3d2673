"""A small web shop for tamesu's browser target: product search, a cart, a checkout form, and a help page with
a chat widget whose answers come from the REST example agent (examples/rest-shop/agent.py).

Pages: /  (search: GET /api/search?q=), /book/<id>, /cart, /checkout, /help (the chat widget).
API:   GET /api/search?q=  POST /api/cart {id}  GET /api/cart  POST /api/order {name, email, card}
       POST /api/chat {message, session_id}  (forwarded to the REST agent's /chat)
The cart lives in a cookie; a `user` cookie (see signed-in.json, a Playwright storage state) signs in.
The checkout's card field loses its label when the shop runs with --a11y-defect (or the page is opened as
/checkout?defect=1), so an accessibility check has something to find.

Run it: python shop.py --port 8000   (--port 0 picks a free port; it prints `listening on URL`)
        --agent-url URL uses a running REST agent instead of starting examples/rest-shop/agent.py.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

HERE = Path(__file__).resolve().parent
REST_AGENT = HERE.parent / "rest-shop" / "agent.py"

BOOKS: dict[str, dict[str, Any]] = {
    "dune": {"title": "Dune", "author": "Frank Herbert", "price": 9.99},
    "solaris": {"title": "Solaris", "author": "Stanisław Lem", "price": 8.50},
    "neuromancer": {"title": "Neuromancer", "author": "William Gibson", "price": 7.25},
    "foundation": {"title": "Foundation", "author": "Isaac Asimov", "price": 8.00},
    "hyperion": {"title": "Hyperion", "author": "Dan Simmons", "price": 10.50},
}


def search(query: str) -> list[dict[str, Any]]:
    words = query.lower().split()
    found = []
    for book_id, book in BOOKS.items():
        haystack = f"{book['title']} {book['author']}".lower()
        if words and all(w in haystack for w in words):
            found.append({"id": book_id, **book})
    return found


class Shop:
    def __init__(self, agent_url: str, a11y_defect: bool) -> None:
        self.agent_url = agent_url
        self.a11y_defect = a11y_defect
        self.orders: list[dict[str, Any]] = []
        self.lock = threading.Lock()


def page(title: str, body: str, user: str | None, cart_count: int, script: str = "") -> str:
    who = f"Signed in as {html.escape(user)}" if user else "Not signed in"
    scripts = f'<script src="/static/{script}"></script>' if script else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} · Paper Moon Books</title>
<link rel="stylesheet" href="/static/shop.css"></head>
<body><header><a class="brand" href="/">Paper Moon Books</a>
<nav aria-label="shop"><a href="/cart">Cart (<span id="cart-count">{cart_count}</span>)</a> <a href="/help">Help</a>
<span id="who">{who}</span></nav></header>
<main>{body}</main>{scripts}</body></html>"""


def home() -> str:
    return """<h1>Find a book</h1>
<form id="search" role="search"><label for="q">Search books</label>
<input id="q" name="q" type="search" autocomplete="off"> <button type="submit">Search</button></form>
<p id="status" aria-live="polite"></p><ul id="results"></ul>"""


def book_page(book_id: str) -> str | None:
    book = BOOKS.get(book_id)
    if book is None:
        return None
    return (f'<article><h1>{html.escape(book["title"])}</h1><p class="author">by {html.escape(book["author"])}</p>'
            f'<p class="price">€{book["price"]:.2f}</p>'
            f'<button id="add" data-id="{book_id}" type="button">Add to cart</button>'
            '<p id="added" aria-live="polite"></p></article>')


def cart_page(items: list[str]) -> str:
    if not items:
        return '<h1>Your cart</h1><p id="empty">Your cart is empty.</p>'
    rows = "".join(f'<li data-id="{i}">{html.escape(BOOKS[i]["title"])} <span>€{BOOKS[i]["price"]:.2f}</span></li>'
                   for i in items if i in BOOKS)
    total = sum(BOOKS[i]["price"] for i in items if i in BOOKS)
    return (f'<h1>Your cart</h1><ul id="cart">{rows}</ul><p id="total">Total €{total:.2f}</p>'
            '<a id="checkout" href="/checkout">Checkout</a>')


def checkout_page(defect: bool) -> str:
    # the defect: the card number field's caption is plain text, not a label, so the field has no accessible
    # name (axe: `label`, critical) and a screen reader announces only "edit text"
    card = ('<span class="caption">Card number</span><input id="card" name="card" inputmode="numeric">' if defect else
            '<label for="card">Card number</label><input id="card" name="card" inputmode="numeric">')
    return f"""<h1>Checkout</h1>
<form id="order"><label for="name">Name</label><input id="name" name="name" autocomplete="name">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="email">
{card}<button type="submit">Place order</button></form><p id="confirmation" aria-live="polite"></p>"""


def help_page() -> str:
    return """<h1>Help</h1><p>Ask our assistant about an order (for example ORD-1001) or a return.</p>
<button id="launcher" type="button" aria-controls="chat">Chat with us</button>
<section id="chat" aria-label="chat with the shop assistant" hidden><div id="chat-log" aria-live="polite"></div>
<p id="typing" hidden>The assistant is typing…</p>
<form id="chat-form"><label for="chat-input">Message</label><input id="chat-input" autocomplete="off">
<button type="submit">Send</button></form></section>"""


def make_handler(shop: Shop) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "PaperMoon/1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read stdout for the URL only
            return

        # ------------------------------------------------------------ helpers

        def _cookies(self) -> SimpleCookie:
            return SimpleCookie(self.headers.get("Cookie", ""))

        def _cart(self) -> list[str]:
            raw = self._cookies().get("cart")
            return [i for i in raw.value.split(".") if i in BOOKS] if raw and raw.value else []

        def _user(self) -> str | None:
            raw = self._cookies().get("user")
            return raw.value if raw and raw.value else None

        def _send(self, status: int, body: str | bytes, content_type: str,
                  headers: dict[str, str] | None = None) -> None:
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _html(self, title: str, body: str, script: str = "", status: int = 200) -> None:
            self._send(status, page(title, body, self._user(), len(self._cart()), script), "text/html; charset=utf-8")

        def _json(self, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(value), "application/json", headers)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                data = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                return {}
            return data if isinstance(data, dict) else {}

        # ------------------------------------------------------------ routes

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            path = parts.path
            if path == "/":
                self._html("Find a book", home(), "search.js")
            elif match := re.fullmatch(r"/book/([a-z]+)", path):
                body = book_page(match.group(1))
                if body is None:
                    self._html("Not found", "<h1>No such book</h1>", status=404)
                else:
                    self._html(BOOKS[match.group(1)]["title"], body, "book.js")
            elif path == "/cart":
                self._html("Cart", cart_page(self._cart()))
            elif path == "/checkout":
                defect = shop.a11y_defect or query.get("defect", ["0"])[0] not in ("0", "")
                self._html("Checkout", checkout_page(defect), "checkout.js")
            elif path == "/help":
                self._html("Help", help_page(), "chat.js")
            elif path == "/api/search":
                self._json({"results": search(query.get("q", [""])[0])})
            elif path == "/api/cart":
                self._json({"items": self._cart()})
            elif path.startswith("/static/") and (HERE / "static" / path.removeprefix("/static/")).is_file():
                name = path.removeprefix("/static/")
                kind = "text/css" if name.endswith(".css") else "text/javascript"
                self._send(200, (HERE / "static" / name).read_bytes(), kind)
            else:
                self._html("Not found", "<h1>Not found</h1>", status=404)

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self._body()
            if path == "/api/cart":
                book_id = str(body.get("id", ""))
                if book_id not in BOOKS:
                    self._json({"error": f"no book {book_id!r}"}, 400)
                    return
                items = [*self._cart(), book_id]
                self._json({"items": items}, headers={"Set-Cookie": f"cart={'.'.join(items)}; Path=/"})
            elif path == "/api/order":
                missing = [k for k in ("name", "email", "card") if not str(body.get(k, "")).strip()]
                if missing:
                    self._json({"error": f"missing {', '.join(missing)}"}, 400)
                    return
                with shop.lock:
                    order_id = f"W-{1001 + len(shop.orders)}"
                    shop.orders.append({"id": order_id, "items": self._cart(), "name": body["name"]})
                self._json({"order": order_id}, headers={"Set-Cookie": "cart=; Path=/"})
            elif path == "/api/chat":
                self._json(*forward_chat(shop.agent_url, body))
            else:
                self._json({"error": "not found"}, 404)

    return Handler


def forward_chat(agent_url: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    request = urllib.request.Request(f"{agent_url}/chat", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read()), 200
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
        return {"reply": "", "error": f"the assistant is unavailable: {exc}"}, 502


def start_rest_agent() -> tuple[subprocess.Popen[str], str]:
    agent = subprocess.Popen([sys.executable, str(REST_AGENT), "--port", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    assert agent.stdout is not None
    for line in agent.stdout:
        if match := re.search(r"listening on (http://\S+)", line):
            # keep draining its output so it never blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in agent.stdout or []], daemon=True).start()
            return agent, match.group(1)
    agent.kill()
    raise SystemExit("the REST example agent did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--agent-url", help="a running REST shop agent (default: start examples/rest-shop)")
    parser.add_argument("--a11y-defect", action="store_true", help="drop the checkout card field's label")
    args = parser.parse_args()
    agent = None
    agent_url = args.agent_url
    if agent_url is None:
        agent, agent_url = start_rest_agent()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(Shop(agent_url.rstrip("/"),
                                                                             args.a11y_defect)))
    server.daemon_threads = True

    def stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/ (agent {quote(agent_url, safe=':/')})",
          flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        if agent is not None:
            agent.terminate()
            try:
                agent.wait(timeout=5)
            except subprocess.TimeoutExpired:
                agent.kill()


if __name__ == "__main__":
    main()
