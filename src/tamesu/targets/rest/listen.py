"""The API tamesu serves for agents that answer by calling back, as Slack, Teams or Telegram bots do."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.conversation import Session, TurnError
from tamesu.net.serve import LoopServer
from tamesu.net.urls import shown_url
from tamesu.targets.rest.answer import timed_out
from tamesu.targets.rest.http import parse_body
from tamesu.targets.rest.read import MAX_EVENTS, holds, text_of
from tamesu.targets.rest.spec import Condition, ListenSpec

QUEUE_LIMIT = 10_000
MAX_BODY_BYTES = 16 * 1024 * 1024


class Listener:
    """Every post to `path` is stamped on arrival and queued for the turn that waits for it."""

    def __init__(self, session: Session, *, path: str, host: str, port: int, public_url: str | None,
                 max_bytes: int = MAX_BODY_BYTES) -> None:
        self._session = session
        self._path = path
        self._max_bytes = min(max_bytes, MAX_BODY_BYTES)
        """The target's max_response_bytes: a post is read up to it, then refused."""
        self._queue: asyncio.Queue[tuple[object, float]] = asyncio.Queue(QUEUE_LIMIT)
        app = Starlette(routes=[Route(path, self._receive, methods=["POST", "PUT"])])
        self._server = LoopServer(app, host=host, port=port)
        self.url = public_url or f"{self._server.url}{path}"
        """What `{{listen.url}}` gives the agent: a public URL as written, its credentials with it."""
        self.received = 0

    def shown(self, *, query: bool = False) -> str:
        """The URL as a line or an event names it: never a `user:password@` written in the public one (a tunnel's
        basic auth), its query (a token) only with `query`."""
        return shown_url(self.url, self._session.redactor.text, query=query)

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    async def _receive(self, request: Request) -> JSONResponse:
        at = self._session.now_ms()
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():  # in pieces: a post is never held past the limit
            size += len(chunk)
            if size > self._max_bytes:
                self._session.event("listen_post_too_large", path=self._path, limit=self._max_bytes,
                                    note=f"a post to {self._path} was larger than max_response_bytes "
                                         f"({self._max_bytes:,}): refused with HTTP 413 after {size:,} bytes")
                return JSONResponse({"ok": False, "error": "body too large"}, status_code=413)
            parts.append(chunk)
        body = b"".join(parts)
        answer: JSONResponse | None = None
        try:
            parsed: object = parse_body(body.decode("utf-8", errors="replace"), request.headers.get("content-type", ""))
        except TurnError as exc:
            # a post that says it is JSON and is not: its text taken as the reply hid the fault (and its tool calls)
            parsed = TurnError(str(exc).replace(" in the answer ", f" in a post to {self._path} ", 1), raw=exc.raw)
            answer = JSONResponse({"ok": False, "error": "malformed JSON"}, status_code=400)
        try:
            self._queue.put_nowait(("" if parsed is None else parsed, at))
        except asyncio.QueueFull:
            return JSONResponse({"ok": False, "error": "too many messages waiting"}, status_code=503)
        self.received += 1
        return answer or JSONResponse({"ok": True})

    async def unasked(self, listen: ListenSpec, wait_s: float, turn_timeout: float) -> dict[str, Any] | None:
        """What the agent posts with no turn asking (more after a turn's answer, a message of its own), for a
        `wait_for` still listening, as a turn's fields: the first post waited for up to `wait_s`, the rest read as
        a turn's posts are, within `turn_timeout`; None when nothing came in time."""
        since = self._session.now_ms()
        first = await self.receive(wait_s)
        if first is None:
            return None
        try:
            async with asyncio.timeout(turn_timeout):
                posts = await self.posts(listen.idle, listen.done, after=[first])
        except TimeoutError:
            raise timed_out(turn_timeout, f"waiting for a post to {self.shown()}", None) from None
        return {**self.turn_fields(listen, posts), "sent_at_ms": min(since, first[1])}

    @staticmethod
    def turn_fields(listen: ListenSpec, posts: list[tuple[object, float]]) -> dict[str, Any]:
        """A turn's fields from its posts: their texts a line apart, the first post with text its first token."""
        docs = [doc for doc, _ in posts]
        texts = [(text_of(listen.text, doc), at) for doc, at in posts]
        return {"text": "\n".join(text for text, _ in texts if text), "raw": docs, "scan": docs,
                "first_token_at_ms": next((at for text, at in texts if text), None), "completed_at_ms": posts[-1][1]}

    def drain(self) -> list[object]:
        """Posts that arrived outside a turn."""
        pending: list[object] = []
        while not self._queue.empty():
            pending.append(self._queue.get_nowait()[0])
        return pending

    async def receive(self, timeout: float | None) -> tuple[Any, float] | None:
        """The next post, or None when `timeout` passes first (None waits for the turn's own deadline); a post
        that could not be read fails the turn."""
        try:
            async with asyncio.timeout(timeout):
                got = await self._queue.get()
        except TimeoutError:
            return None
        if isinstance(got[0], TurnError):
            raise got[0]
        return got

    async def posts(self, idle: float, done: Condition | None,
                    after: list[tuple[Any, float]] | None = None) -> list[tuple[object, float]]:
        """One turn's posts: until `done` holds on one, or `idle` passes without a post after at least one (the
        first may take the whole turn, which the caller bounds); `after`, those the turn already has."""
        posts: list[tuple[object, float]] = list(after or [])
        if posts and holds(done, posts[-1][0]):
            return posts
        while (got := await self.receive(idle if posts else None)) is not None:
            posts.append(got)
            if len(posts) >= MAX_EVENTS:
                raise TurnError(f"more than {MAX_EVENTS} posts in one turn", raw=[doc for doc, _ in posts],
                                events=True)
            if holds(done, got[0]):
                break
        return posts
