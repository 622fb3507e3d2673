"""Push notifications through a forwarding remote agent: the real agent posts them to the proxy, which records
each one and posts it on to the listener the orchestrator named.

Without this, a push config went on to the real agent as written, and the real agent posted its notifications
straight to the orchestrator: the delegation's answer reached the agent under test past the proxy, unrecorded.
So every push config the orchestrator sends (in a send's configuration, or set on its own, in either version's
shape and on any binding) has its URL replaced by one of the proxy's (`/.tamesu/push/KEY`, a key per listener
URL, not guessable), and answers that list or read configs show the orchestrator its own URL again. A post the
real agent makes there goes on with its body and its token headers as they are; the listener's answer comes
back to the real agent. Each is a `push_relayed` event (`agent`, `task_id`, `state`, `url`, `status`), and a post
the listener refuses or never takes is a `push_failed` event, as for the scripted agents' own pushes.
"""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
from typing import Any

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from tamesu.conversation import Session
from tamesu.net.clients import AsyncClient, client_options, os_reason
from tamesu.net.urls import shown_url
from tamesu.remote._wire import Reply

PUSH_PATH = "/.tamesu/push/"
PUSH_TIMEOUT = 10.0
"""A listener that does not take a notification within this long has it dropped (`push_failed`)."""
_CONFIG_KEYS = frozenset({"pushNotificationConfig", "taskPushNotificationConfig", "pushNotification",
                          "push_notification_config", "task_push_notification_config", "push_notification"})
"""Where a push config sits in a request: 0.3's JSON and proto-JSON, 1.0's send configuration; proto-JSON's
field names either way (a2a-sdk's 0.3 HTTP+JSON client writes them as the proto does, `push_notification`)."""
_CREATE = frozenset({"CreateTaskPushNotificationConfig"})
"""1.0's create call, whose whole body is the config (its `url` at the top)."""
_PASSED = frozenset({"content-type", "x-a2a-notification-token", "authorization", "a2a-version"})


class PushRelay:
    def __init__(self, name: str, session: Session) -> None:
        self.name = name
        self.proxy_origin = ""
        """Set once the HTTP port is bound: where the real agent posts."""
        self._session = session
        self._by_key: dict[str, str] = {}
        self._by_url: dict[str, str] = {}
        # kept alive between pushes: one that went out on a connection the listener had just closed is sent
        # again once, and said (`resent`), as the scripted agents' own pushes are
        self._client = AsyncClient(**client_options(on_resend=self._resent), timeout=PUSH_TIMEOUT,
                                   total=PUSH_TIMEOUT)

    def _resent(self, request: httpx.Request, reason: str) -> None:
        self._session.event("resent", agent=self.name, reason=reason,
                            url=shown_push_url(self._session, str(request.url)))

    async def aclose(self) -> None:
        await self._client.aclose()

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app`, but posts to the proxy's push path come here first: the real agent has no proxy `token`."""

        async def routed(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"].startswith(PUSH_PATH):
                await self._take(scope, receive, send)
            else:
                await app(scope, receive, send)

        return routed

    def outgoing(self, payload: object, method: str) -> Any:
        """`payload` (a request's params or body, as JSON) with each push config's URL the proxy's, or None when
        it holds none."""
        if not isinstance(payload, dict):
            return None
        copied = copy.deepcopy(payload)
        moved = self._walk(copied)
        if method in _CREATE or method.endswith("/pushNotificationConfigs"):
            moved = self._move(copied) or moved
        return copied if moved else None

    def outgoing_body(self, body: bytes, method: str) -> bytes:
        """An HTTP request's body with its push configs' URLs moved (the body as is when it has none)."""
        try:
            parsed = json.loads(body) if body else None
        except (ValueError, UnicodeDecodeError):
            return body
        if isinstance(parsed, dict) and parsed.get("jsonrpc") == "2.0":
            params = self.outgoing(parsed.get("params"), str(parsed.get("method") or ""))
            return body if params is None else json.dumps({**parsed, "params": params}).encode()
        changed = self.outgoing(parsed, method)
        return body if changed is None else json.dumps(changed).encode()

    def incoming(self, payload: object) -> object:
        """An answer with the proxy's push URLs back as the orchestrator set them."""
        if isinstance(payload, str):
            key = payload.removeprefix(self.proxy_origin + PUSH_PATH)
            return self._by_key.get(key, payload) if key != payload else payload
        if isinstance(payload, dict):
            return {k: self.incoming(v) for k, v in payload.items()}
        if isinstance(payload, list):
            return [self.incoming(v) for v in payload]
        return payload

    def incoming_bytes(self, body: bytes) -> bytes:
        for key, url in self._by_key.items():
            body = body.replace(f"{self.proxy_origin}{PUSH_PATH}{key}".encode(), url.encode())
        return body

    def _walk(self, node: object) -> bool:
        moved = False
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _CONFIG_KEYS and isinstance(value, dict):
                    moved = self._move(value) or moved
                moved = self._walk(value) or moved
        elif isinstance(node, list):
            for value in node:
                moved = self._walk(value) or moved
        return moved

    def _move(self, config: dict[str, Any]) -> bool:
        url = config.get("url")
        if not isinstance(url, str) or not url or url.startswith(self.proxy_origin + PUSH_PATH):
            return False
        key = self._by_url.get(url)
        if key is None:
            key = secrets.token_urlsafe(16)
            self._by_url[url], self._by_key[key] = key, url
        config["url"] = f"{self.proxy_origin}{PUSH_PATH}{key}"
        return True

    async def _take(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        listener = self._by_key.get(scope["path"][len(PUSH_PATH):])
        if scope["method"] != "POST" or listener is None:
            await _answer(send, 404, b"")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        reply = Reply()
        with contextlib.suppress(ValueError, UnicodeDecodeError):  # a body it cannot read is relayed all the same
            reply.feed(json.loads(body))
        shown = shown_push_url(self._session, listener)
        try:
            answer = await self._client.post(listener, content=body,
                                             headers={k: v for k, v in headers.items() if k in _PASSED})
        except httpx.HTTPError as exc:
            self._failed(reply, shown, f"{type(exc).__name__}: {os_reason(exc)}")
            await _answer(send, 502, b"")
            return
        self._session.event("push_relayed", agent=self.name, task_id=reply.task_id, state=reply.state, url=shown,
                            status=answer.status_code)
        if answer.status_code >= 400:
            self._failed(reply, shown, f"HTTP {answer.status_code}: the listener refused it")
        await _answer(send, answer.status_code, answer.content)

    def _failed(self, reply: Reply, url: str, reason: str) -> None:
        self._session.event("push_failed", agent=self.name, task_id=reply.task_id, url=url,
                            reason=self._session.redactor.text(reason))


def shown_push_url(session: Session, url: str) -> str:
    """A listener's url as the run's events name it: its secrets masked and never a `user:password@` in it (a
    credential whether or not it was declared a secret)."""
    return shown_url(url, session.redactor.text, query=True)


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
