"""The local listener push notifications arrive at: one per session, on 127.0.0.1 (or `push.addr`).

A notification counts only with the session's token in `X-A2A-Notification-Token` (anything else is answered 401
and ignored, and said: a `push_refused` event, as is a body over MAX_BODY_BYTES or one past a full queue, so an
agent whose notifications never count is seen, not only slower through the fallback poll). Each one is stamped on
arrival, recorded as a `push_received` event and queued for the turn that waits for its task; a body that is not an
A2A task or event is answered 400 and recorded as `push_unreadable`. A state only the fallback tasks/get found is a
`push_missed` event (`polled`).
"""

from __future__ import annotations

import asyncio
import json
import secrets

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.conversation import Session
from tamesu.matching import one_line
from tamesu.net.serve import LoopServer
from tamesu.targets.a2a._normalize import push_body, state_of, task_id_of
from tamesu.types import JSONObject

PATH = "/a2a/push"
TOKEN_HEADER = "X-A2A-Notification-Token"
QUEUE_LIMIT = 10_000
MAX_BODY_BYTES = 16 * 1024 * 1024


class PushListener:
    def __init__(self, session: Session, *, host: str, port: int, public_url: str | None) -> None:
        self._session = session
        self.token = secrets.token_urlsafe(24)
        self._queue: asyncio.Queue[tuple[JSONObject, float]] = asyncio.Queue(QUEUE_LIMIT)
        app = Starlette(routes=[Route("/{path:path}", self._receive, methods=["POST"])])
        self._server = LoopServer(app, host=host, port=port)
        self.url = public_url or f"{self._server.url}{PATH}"  # 127.0.0.1 for a wildcard bind (reachable_host)
        self.received = 0

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    async def _receive(self, request: Request) -> JSONResponse:
        at = self._session.now_ms()
        presented = request.headers.get(TOKEN_HEADER)
        if not secrets.compare_digest(presented or "", self.token):
            # the token an agent sent is never recorded: a wrong one may be another session's, or a secret
            why = f"no {TOKEN_HEADER} header" if presented is None else f"a wrong {TOKEN_HEADER}"
            self._session.event("push_refused", status=401, reason=f"{why}: the agent must send the token it was "
                                                                   "given with the push config")
            return JSONResponse({"ok": False, "error": "unknown notification token"}, status_code=401)
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            self._session.event("push_refused", status=413,
                                reason=f"a body of {len(body)} bytes, over {MAX_BODY_BYTES} bytes")
            return JSONResponse({"ok": False, "error": "body too large"}, status_code=413)
        try:
            doc = push_body(json.loads(body))
        except (ValueError, UnicodeDecodeError) as exc:
            reason = one_line(str(exc), 300)  # a cut keeps no secret's head: the redactor masks one before `…`
            self._session.event("push_unreadable", reason=reason)
            return JSONResponse({"ok": False, "error": reason}, status_code=400)
        try:
            self._queue.put_nowait((doc, at))
        except asyncio.QueueFull:
            self._session.event("push_refused", status=503,
                                reason=f"{QUEUE_LIMIT} notifications already waiting to be read")
            return JSONResponse({"ok": False, "error": "too many notifications waiting"}, status_code=503)
        self.received += 1
        self._session.event("push_received", task_id=task_id_of(doc), kind=doc.get("kind"), state=state_of(doc))
        return JSONResponse({"ok": True})

    def polled(self, task_id: str, before: str | None, now: str | None, waited: float) -> None:
        """The fallback tasks/get found the task in a state no notification had brought: a `push_missed` event,
        since an agent whose notifications are lost (or never sent) otherwise only makes each turn slower."""
        if now is not None and now != before:
            self._session.event("push_missed", task_id=task_id, state=now,
                                reason=f"no notification of it reached {self.url} within {waited:g}s: the "
                                       "fallback tasks/get found it")

    async def next(self, timeout: float) -> tuple[JSONObject, float] | None:
        """The next notification, or None when `timeout` passes first."""
        try:
            async with asyncio.timeout(timeout):
                return await self._queue.get()
        except TimeoutError:
            return None
