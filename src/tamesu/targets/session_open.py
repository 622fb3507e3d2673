"""`session.open` for targets that are not REST: one HTTP request made before the target connects (create the
call, mint a token), whose JSON answer's captures render as `{{session.NAME}}` in the target's configuration."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

import httpx

from tamesu.conversation import Session
from tamesu.errors import InfraError, TemplateError
from tamesu.matching import one_line
from tamesu.net.bounded import is_too_large
from tamesu.net.clients import async_client, no_answer
from tamesu.targets.base import SessionOpenSpec
from tamesu.targets.rest.read import searched, values

_EXCERPT = 200
MAX_ANSWER_BYTES = 16_000_000
"""The most of session.open's answer read (as a hook's or an `http` check's): it is held in memory whole."""


def _expected(status: int, expect: list[int] | int | None) -> bool:
    if expect is None:
        return 200 <= status < 300
    return status in (expect if isinstance(expect, list) else [expect])


def expected_words(expected: list[int] | int | None) -> str:
    """What `expect_status` asked for, as a line says it after the status that came (`answered HTTP 201` alone read
    as a success)."""
    if expected is None:
        return "not a 2xx"
    listed = expected if isinstance(expected, list) else [expected]
    return f"not the expect_status {' or '.join(str(code) for code in listed)}"


def failed_because(exc: BaseException, spec: SessionOpenSpec, masked_url: str) -> str:
    """`session.open METHOD URL: why` its request failed: a timeout names the setting that ran out (the error
    alone said "Timeout on reading data from socket", of no setting)."""
    cause = exc if isinstance(exc, httpx.TimeoutException | TimeoutError) else exc.__cause__
    if isinstance(cause, httpx.TimeoutException | TimeoutError):
        why = f"{no_answer(cause, f'{spec.timeout:g}')} (session.open.timeout)"
    else:
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, httpx.HTTPError) else str(exc)
    return f"session.open {spec.method.upper()} {masked_url}: {why}"


async def open_session(spec: SessionOpenSpec, session: Session, what: str) -> None:
    """Make the request and keep its captures in `session.values`; anything wrong is an infrastructure
    error naming the request (and, for a capture, what the answer held instead)."""
    context = session.with_captures()
    try:
        url = context.render_url(spec.url)
        headers = {k: context.render_text(v) for k, v in spec.headers.items()}
        body = context.render_value(spec.body) if spec.body is not None else None
    except TemplateError as exc:
        raise InfraError(f"{what}: session.open: {exc}") from exc
    masked = session.redactor.text(url)
    method = spec.method.upper()
    try:
        async with async_client(spec.timeout, max_bytes=MAX_ANSWER_BYTES) as client:
            answer = await client.request(method, url, headers=headers,
                                          **({"json": body} if body is not None else {}))
    except httpx.HTTPError as exc:
        if is_too_large(exc):  # an enormous or endless answer was read whole until the timeout
            raise InfraError(f"{what}: session.open {method} {masked}: the answer is larger than "
                             f"{MAX_ANSWER_BYTES:,} bytes, more than session.open reads") from None
        raise InfraError(f"{what}: {failed_because(exc, spec, masked)}") from exc
    except httpx.InvalidURL as exc:  # a URL a template made (`{{env.BASE}}/open`) that is none: 'internal error'
        raise InfraError(f"{what}: session.open {method} {masked}: not a URL that can be sent to ({exc})") from None
    # on one line and cut at a word with … before the masking: a secret the cut falls in is dropped, or masked by
    # its head (the masking knows a secret cut at an ellipsis); cut bare, its first characters were said
    text = one_line(answer.text, _EXCERPT)
    if not _expected(answer.status_code, spec.expect_status):
        raise InfraError(f"{what}: session.open {method} {masked} answered HTTP {answer.status_code}, "
                         f"{expected_words(spec.expect_status)}: {session.redactor.text(text)}")
    try:
        document: object = answer.json()
    except (json.JSONDecodeError, ValueError):
        document = answer.text
    for name, path in spec.capture.items():
        found = [v for v in values(path, document) if v is not None]
        if not found:
            raise InfraError(f"{what}: session.open capture {name} ({path}) found nothing: "
                             f"{session.redactor.text(searched(answer.status_code, document))}")
        session.values[name] = found[0]
    session.event("session_open", url=masked, status=answer.status_code, captured=sorted(spec.capture))
    mask_credentials(session, spec.headers, spec.capture)


_CREDENTIAL_HEADER = re.compile(r"authorization|cookie|token|key|secret|password|signature", re.IGNORECASE)


def mask_credentials(session: Session, headers: Mapping[str, str], captured: Iterable[str]) -> None:
    """A value `session.open` captured that goes in a credential's header (Authorization, Cookie, X-Api-Key,
    ...: `Bearer {{session.token}}`) is masked as a secret is: an agent that echoes it, or an error that quotes
    it, would otherwise write it to every file of the run."""
    for header, template in headers.items():
        if not _CREDENTIAL_HEADER.search(header):
            continue
        for name in captured:
            value = session.values.get(name)
            if value is not None and re.search(r"\{\{\s*session\." + re.escape(name) + r"\s*\}\}", template):
                session.redactor.add(str(value))


class SocketAddress(Protocol):
    """What a socket target's spec says of where its agent is."""

    @property
    def url(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]: ...


class CapturedSocketAddress:
    """`url` and `headers` of a socket target rendered with `session.open`'s captures (`{{session.NAME}}`)."""

    spec: SocketAddress

    def _url(self, session: Session) -> str:
        return session.with_captures().render_url(self.spec.url)

    def _headers(self, session: Session) -> dict[str, str]:
        mask_credentials(session, self.spec.headers, session.values)
        context = session.with_captures()
        return {name: context.render_text(value) for name, value in self.spec.headers.items()}
