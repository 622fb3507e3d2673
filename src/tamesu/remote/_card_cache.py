"""Agent cards served the way caches and the A2A TCK expect: Cache-Control, Last-Modified and an ETag, and
304 Not Modified for a client that already holds the card (If-None-Match / If-Modified-Since)."""

from __future__ import annotations

import hashlib
import time
from email.utils import formatdate, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
MAX_AGE = 60
"""Seconds a client may keep the card; a run's remote agent lives for one run, so a short time."""


class CardCache:
    """ASGI middleware around an app that serves cards: adds the headers, answers conditional requests."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.modified = formatdate(time.time(), usegmt=True)
        self._modified_at = int(time.time())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD") or \
                not str(scope.get("path", "")).endswith(CARD_PATHS):
            await self.app(scope, receive, send)
            return
        started: dict[str, Any] = {}
        body = bytearray()

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))

        await self.app(scope, receive, keep)
        status = started.get("status", 500)
        headers = [(k, v) for k, v in started.get("headers", []) if k.lower() not in (b"content-length",)]
        if status != 200:
            await send({"type": "http.response.start", "status": status,
                        "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": bytes(body)})
            return
        etag = f'"{hashlib.sha256(bytes(body)).hexdigest()[:32]}"'
        headers += [(b"cache-control", f"public, max-age={MAX_AGE}".encode()), (b"etag", etag.encode()),
                    (b"last-modified", self.modified.encode())]
        if self._not_modified(scope, etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else bytes(body)})

    def _not_modified(self, scope: Scope, etag: str) -> bool:
        asked = {k.lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if b"if-none-match" in asked:
            return etag in [tag.strip() for tag in asked[b"if-none-match"].split(",")] or \
                asked[b"if-none-match"].strip() == "*"
        if b"if-modified-since" in asked:
            try:
                return parsedate_to_datetime(asked[b"if-modified-since"]).timestamp() >= self._modified_at
            except (TypeError, ValueError):
                return False
        return False
