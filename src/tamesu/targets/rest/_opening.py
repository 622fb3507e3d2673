"""What a rest session makes before its first turn, beside the HTTP client: the `session.open` call and its
captures, the listener of `response.listen`, the websocket of `streaming: websocket`. Each failure is an
InfraError naming the target: the agent was never talked to."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from tamesu.conversation import Session, TurnError
from tamesu.errors import InfraError
from tamesu.net.clients import BodyTimeout, os_reason
from tamesu.suite.templates import Context
from tamesu.targets.base import SessionOpenSpec
from tamesu.targets.rest.http import Http, excerpt
from tamesu.targets.rest.read import searched, values
from tamesu.targets.rest.request import render_url, rendered_headers, resolve_url, status_expected
from tamesu.targets.rest.spec import ListenSpec, RestSpec
from tamesu.targets.session_open import expected_words, failed_because, mask_credentials
from tamesu.types import split_addr

if TYPE_CHECKING:
    # imported where used: websockets (6.6 MiB) by `streaming: websocket`, the listener's HTTP server (uvicorn,
    # starlette: 16 MiB) by `listen:`
    from tamesu.targets.rest.listen import Listener
    from tamesu.targets.rest.ws import WsLink


async def open_conversation(session: Session, http: Http, ctx: Context, spec: SessionOpenSpec, target: RestSpec,
                            what: str) -> None:
    """`session.open`'s request, its captures put in `session.values`; the credentials it named are masked."""
    masked = session.redactor.text(url := resolve_url(render_url(ctx, spec.url), target.url, ctx, what))
    request = http.build(spec.method.upper(), url, rendered_headers(ctx, spec.headers), ctx.render_value(spec.body),
                         has_body=spec.body is not None, pool_timeout=spec.timeout)
    heard: list[int] = []
    try:
        async with asyncio.timeout(spec.timeout):  # in all: a server answering a byte now and then held the run
            answer = await http.fetch(request, heard.append)
    except TimeoutError as exc:
        # its status came and its body did not: "no answer" was said of a server that answered at once
        why = BodyTimeout(heard[0], spec.timeout) if heard else exc
        raise InfraError(f"{what}: {failed_because(why, spec, masked)}") from exc
    except TurnError as exc:
        raise InfraError(f"{what}: {failed_because(exc, spec, masked)}") from exc
    if not status_expected(answer.status, spec.expect_status):
        raise InfraError(f"{what}: session.open {spec.method.upper()} {masked} answered HTTP {answer.status}, "
                         f"{expected_words(spec.expect_status)}: {session.redactor.text(excerpt(answer.body))}")
    for name, path in spec.capture.items():
        found = [v for v in values(path, answer.body) if v is not None]
        if not found:
            raise InfraError(f"{what}: session.open capture {name} ({path}) found nothing: "
                             f"{session.redactor.text(searched(answer.status, answer.body))}")
        session.values[name] = found[0]
    session.event("session_open", url=masked, status=answer.status, captured=sorted(spec.capture))
    mask_credentials(session, {**spec.headers, **target.headers}, spec.capture)


async def start_listener(session: Session, listen: ListenSpec, max_bytes: int, what: str) -> Listener:
    host, port = split_addr(listen.addr) if listen.addr else ("127.0.0.1", 0)
    public_url = session.context.render_url(listen.url) if listen.url else None
    listener: Listener | None = None
    try:
        from tamesu.targets.rest.listen import Listener

        listener = Listener(session, path=listen.path, host=host, port=port, public_url=public_url,
                            max_bytes=max_bytes)
        await listener.start()
    except Exception as exc:
        if listener is not None:  # bound but not serving: its socket is let go here, as no close will see it
            with contextlib.suppress(Exception):
                await listener.stop()
        raise InfraError(f"{what}: cannot listen on {host}:{port}: {os_reason(exc)}") from exc
    return listener


async def connect_websocket(session: Session, ctx: Context, spec: RestSpec, what: str) -> tuple[WsLink, str]:
    """The session's websocket and its URL as shown (masked)."""
    url = render_url(ctx, spec.url)
    if not url.startswith(("ws://", "wss://")):
        raise InfraError(f"{what}: streaming: websocket needs a ws:// or wss:// url, got {session.redactor.text(url)}")
    from tamesu.targets.rest.ws import WsLink

    link = await WsLink.connect(url, rendered_headers(ctx, spec.headers), connect_spec=spec.connect,
                                session=session, what=what, tls=spec.tls)
    return link, session.redactor.text(url)
