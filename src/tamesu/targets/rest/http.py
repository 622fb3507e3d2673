"""HTTP for the rest target: one client per target instance (aiohttp's `ClientSession` through
`tamesu.net.direct`), connect retries, answers as tamesu reads them."""

from __future__ import annotations

import asyncio
import codecs
import email.message
import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import httpx
from multidict import CIMultiDict
from yarl import URL

from tamesu.conversation import Session, TurnError
from tamesu.errors import InfraError
from tamesu.matching import one_line
from tamesu.net.aio import DISCONNECTED
from tamesu.net.clients import os_reason
from tamesu.net.direct import DirectClient, DroppedBody, Request, chunks, finish, timeouts, whole
from tamesu.net.json_depth import MAX_JSON_DEPTH, deeper_than
from tamesu.net.rate_limit import rate_limit_wait, said_as_events, still_limited
from tamesu.net.retry_after import retry_after_from_headers
from tamesu.net.tls import PLAIN_TO_TLS, TlsSpec, speaks_tls
from tamesu.net.urls import shown_url, url_problem
from tamesu.suite.schema import ConnectSpec
from tamesu.suite.secrets import Redactor
from tamesu.targets.rest.body import Reading, bounded_chunks, reading_of
from tamesu.types import JSONValue

T = TypeVar("T")
EXCERPT = 200
MAX_REDIRECTS = 10
MAX_PARSED_URLS = 256
_PARSED: dict[str, URL] = {}
"""The URLs the rest targets of this process parsed, shared: a turn's URL is most often one parsed before, by this
conversation or another of the same target (a yarl URL is immutable). Cleared when full (a poll's job ids)."""
_BODY_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""A JSON body as httpx encodes it (compact, UTF-8), the encoder made once rather than for every request."""


def parse_body(text: str, content_type: str = "") -> JSONValue:
    """JSON when the text is a JSON object, array or string (whatever the content type says), else the text; None
    when empty or JSON's null.

    A body that says it is JSON (`application/json`, `...+json`) and is not is a failed turn: passing its
    text on as the answer would hide the fault (and every tool call in it)."""
    if not text.strip():
        return None
    try:
        parsed: JSONValue = json.loads(text)
    except json.JSONDecodeError as exc:
        if is_json_type(content_type):
            said = exc.msg.removesuffix(" at")  # "Unterminated string starting at": the position is where it began
            raise TurnError(f"malformed JSON in the answer ({content_type.split(';')[0].strip()}): {said} at "
                            f"line {exc.lineno} column {exc.colno}: {excerpt(text)}", raw=text) from None
        return text
    except (RecursionError, ValueError) as exc:  # JSON, but more than Python reads: the agent's, not a bug of ours
        return _unreadable(text, content_type, "nested too deeply" if isinstance(exc, RecursionError) else
                           "a number of more than 4,300 digits" if "digits" in str(exc) else str(exc))
    if isinstance(parsed, bool | int | float):
        # an answer `42`, a streamed token ` 2024`: words as written, which as JSON had no text at all (the reply
        # was graded as saying nothing, the token dropped)
        return text
    # brackets counted first (in C): only a document that could be that deep is walked
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and deeper_than(parsed):
        return _unreadable(text, content_type, f"nested more than {MAX_JSON_DEPTH} levels deep")
    return parsed


def _unreadable(text: str, content_type: str, why: str) -> JSONValue:
    """A failed turn for a body that says it is JSON; any other (an event, a post not marked JSON) is kept as its
    text."""
    if is_json_type(content_type):
        raise TurnError(f"JSON in the answer that cannot be read ({content_type.split(';')[0].strip()}): {why}: "
                        f"{excerpt(text)}", raw=text)
    return text


def is_json_type(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def excerpt(doc: object) -> str:
    """The start of a body for a one-line message, cut as every line is cut (`one_line`)."""
    text = doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)
    head = text[:EXCERPT * 4]  # a cut first: a body may be megabytes
    shown = one_line(head, EXCERPT)
    return shown + "…" if len(text) > len(head) and not shown.endswith("…") else shown


def unreachable_reason(exc: BaseException) -> str | None:
    """Why a request never reached the agent, or None when it did (or the error is not about reaching it)."""
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return "connect timed out"
    if isinstance(exc, httpx.ConnectError):
        return os_reason(exc)
    return None


async def with_connect_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    reason_of: Callable[[BaseException], str | None],
    connect: ConnectSpec,
    session: Session,
    what: str,
    url: str | Callable[[], str],
) -> T:
    """Run `attempt` until it reaches the agent: failures `reason_of` recognises are retried, then InfraError.

    `url` may be a function giving it, called only when a failure is reported (not on every request)."""
    for number in range(1, connect.attempts + 1):
        try:
            return await attempt()
        except Exception as exc:
            reason = reason_of(exc)
            if reason is None:
                raise
            masked = shown_url(url if isinstance(url, str) else url(), session.redactor.text, query=True)
            if reason.startswith("TLS"):  # a certificate, a handshake: the same again at every attempt
                raise InfraError(f"{what}: cannot reach {masked}: {reason}") from exc
            if number == connect.attempts:
                tries = f"{number} attempt{'s' if number != 1 else ''}"
                raise InfraError(f"{what}: cannot reach {masked} after {tries}: {reason}") from exc
            session.event("connect_retry", attempt=number, attempts=connect.attempts, reason=reason, url=masked)
            await asyncio.sleep(connect.backoff)
    raise AssertionError("unreachable: connect.attempts is at least 1")


@dataclass
class Answer:
    status: int
    body: JSONValue
    sent_at_ms: float
    completed_at_ms: float
    data_stream: bool = False
    """The body is the AI SDK 4 data stream protocol (`ui_stream.read_data_stream`), read as such."""


class Http:
    """The target's one client (a shared client costs 5x the CPU under concurrency: see DESIGN.md). Each of its
    requests is sent under its caller's timeout (a turn's `turn_timeout`, `session.open`'s `timeout`), which bounds
    the whole request, its answer's reads too; `pool_timeout` (or a request's own) bounds only the wait for a free
    connection of the pool, and `connect.timeout` the making of a new one. (The target gives the pool a second
    more than `turn_timeout`: a turn that waited that long is said timed out by the turn's own timer.)"""

    def __init__(self, *, session: Session, connect: ConnectSpec, pool_timeout: float, what: str,
                 max_bytes: int, tls: TlsSpec | None = None, rate_limit_retries: int = 3) -> None:
        self._session = session
        self._rate_limit_retries = rate_limit_retries
        self.max_bytes = max_bytes
        """The target's max_response_bytes: no body is read past it."""
        self._connect = connect
        self._what = what
        # a turn whose connection ended before any answer, at once, is sent again once (tamesu.net.direct);
        # redirects are followed as a browser or an SDK would; a loop ends after MAX_REDIRECTS, reported as one
        # a header carrying a secret (`X-Api-Key: {{secrets.K}}`) is not sent on to another host a redirect names
        self.client = DirectClient(tls=tls, on_resend=self._resent, max_redirects=MAX_REDIRECTS,
                                   holds_secret=lambda value: session.redactor.text(value) != value,
                                   on_withheld=self._withheld)
        self._timeout = timeouts(pool_timeout, connect.timeout)
        self.requests = 0
        """Requests that reached the agent."""
        self.unreachable: str | None = None
        """Why the last attempt did not reach the agent, while it is being retried."""

    def _resent(self, request: Request, reason: str) -> None:
        self._session.event("resent", reason=reason, url=self._mask(request))

    def _withheld(self, url: URL, names: list[str]) -> None:
        self._session.event("redirect_headers_withheld", headers=names, url=self._session.redactor.text(str(url)),
                            reason="they carry a secret, and the redirect names another host")

    def _stamp_trace(self, request: Request) -> None:
        """Every request of a turn carries the turn's `traceparent` (unless the suite set its own); the
        redirects it is sent on carry its headers."""
        trace = self._session.trace
        if trace is not None and "traceparent" not in request.headers:
            request.headers["traceparent"] = trace.traceparent

    def build(self, method: str, url: str, headers: dict[str, str], body: Any, *, has_body: bool,
              pool_timeout: float | None = None) -> Request:
        """A body that is a string goes as text/plain (unless `headers` say otherwise), anything else as JSON
        encoded as httpx encodes it (compact, UTF-8)."""
        sent = CIMultiDict(headers)
        content: bytes | None = None
        if has_body:
            if isinstance(body, str):
                sent.setdefault("Content-Type", "text/plain; charset=utf-8")
                content = body.encode()
            else:
                sent.setdefault("Content-Type", "application/json")
                content = _BODY_JSON.encode(body).encode()
        return self.request(method, url, sent, content, pool_timeout=pool_timeout)

    def request(self, method: str, url: str, headers: CIMultiDict[str], content: bytes | None, *,
                pool_timeout: float | None = None) -> Request:
        """A request of these bytes (a body already encoded: a multipart form's); `pool_timeout`: its own bound on
        the wait for a free connection, else the target's."""
        chosen = self._timeout if pool_timeout is None else timeouts(pool_timeout, self._connect.timeout)
        return Request(method, self._parsed(url), headers, content, chosen)

    def _parsed(self, url: str) -> URL:
        """`url` parsed once for the process (`_PARSED`): a turn most often sends to a URL an earlier turn sent to."""
        found = _PARSED.get(url)
        if found is None:
            if len(_PARSED) >= MAX_PARSED_URLS:  # URLs that change every turn (a poll's job id)
                _PARSED.clear()
            # a URL made from templates (`{{env.AGENT_URL}}/chat`) is first whole here; one that cannot be was an
            # internal error in every test
            wrong = url_problem(url)
            try:
                parsed = URL(url)
            except ValueError as exc:
                wrong = wrong or str(exc)
            if wrong is not None:
                raise InfraError(f"{self._what}: {self._session.redactor.text(url)}: {wrong}")
            found = _PARSED[url] = parsed
        return found

    async def open_stream(self, request: Request) -> tuple[aiohttp.ClientResponse, float]:
        """Send with connect retries; the response's body is left unread (`finish` it). Returns it and when it
        was sent."""

        async def attempt() -> tuple[aiohttp.ClientResponse, float]:
            sent_at = self._session.now_ms()
            self._stamp_trace(request)
            try:
                response = await self.client.send(request)
            except DroppedBody as exc:
                self.requests += 1
                moved = self._session.redactor.text(str(exc.location))
                raise InfraError(f"{self._what}: {request.method} {self._mask(request)} was redirected (HTTP "
                                 f"{exc.status}) to {moved}, which refused the GET a {exc.status} is followed with, "
                                 f"without its body (HTTP 405): use {moved} in the suite (a server that moved the "
                                 "endpoint keeps the request with 307 or 308)") from None
            except httpx.HTTPError as exc:
                reason = unreachable_reason(exc)
                self.unreachable = reason
                if isinstance(exc, httpx.TooManyRedirects):
                    self.requests += 1
                    raise TurnError(f"{request.method} {self._mask(request)}: a redirect loop (more than "
                                    f"{MAX_REDIRECTS} redirects)") from exc
                if isinstance(exc, httpx.LocalProtocolError):  # never sent: the suite's values, not the agent
                    raise InfraError(f"{self._what}: {request.method} {self._mask(request)}: {os_reason(exc)}") from exc
                if reason is None:
                    self.requests += 1
                    if await self._plain_to_tls(request, exc):
                        raise InfraError(f"{self._what}: {request.method} {self._mask(request)}: {PLAIN_TO_TLS}") \
                            from exc
                    raise TurnError(f"{request.method} {self._mask(request)} failed: {os_reason(exc)}") from exc
                raise
            self.unreachable = None
            self.requests += 1
            return response, sent_at

        for retried in range(self._rate_limit_retries + 1):
            response, sent_at = await with_connect_retries(
                attempt, reason_of=unreachable_reason, connect=self._connect, session=self._session, what=self._what,
                url=lambda: str(request.url))
            if response.status != 429 or self._rate_limit_retries == 0:
                return response, sent_at
            # a gateway's or the agent's rate limit, met by tests run side by side: no answer of the agent's to
            # grade (it was read as one that said nothing, a failure blamed on the agent), so wait as it asks
            asked = retry_after_from_headers(response.headers)
            finish(response)
            if retried == self._rate_limit_retries:
                break
            wait = rate_limit_wait(asked, self._connect.backoff, retried)
            said_as_events(self._session.event, self._session.redactor.text)(str(request.url), retried + 1, asked,
                                                                             wait)
            self.unreachable = "the agent answered HTTP 429 (too many requests)"  # said if the turn times out
            await asyncio.sleep(wait)
            self.unreachable = None
        raise InfraError(f"{self._what}: {request.method} {self._mask(request)}: "
                         f"{still_limited(self._rate_limit_retries + 1, self._session.runs_going())} "
                         "(rate_limit_retries: 0 takes a 429 as the turn's answer)")

    async def fetch(self, request: Request, heard: Callable[[int], object] | None = None) -> Answer:
        """The whole answer to `request`; `heard` is told its status as soon as the headers come (a caller's
        timeout then says the body was what did not come)."""
        response, sent_at = await self.open_stream(request)
        if heard is not None:
            heard(response.status)
        try:
            text, cut = await read_text(response, self._session, self.max_bytes)
        finally:
            finish(response)
        return Answer(response.status, answer_body(response.status, response.headers, text, cut), sent_at,
                      self._session.now_ms())

    async def _plain_to_tls(self, request: Request, exc: httpx.HTTPError) -> bool:
        """An http:// request the server closed before any answer (even when sent again), to a port that speaks
        TLS: the url's scheme is wrong, no agent failed."""
        url = request.url
        if url.scheme != "http" or url.host is None or url.port is None or str(exc) != DISCONNECTED:
            return False
        return await speaks_tls(url.host, url.port, min(self._connect.timeout, 3.0))

    def _mask(self, request: Request) -> str:
        return self._session.redactor.text(str(request.url))

    async def aclose(self) -> None:
        await self.client.aclose()


async def read_text(response: aiohttp.ClientResponse, session: Session, limit: int) -> tuple[str, bool]:
    """The body as text, read in pieces up to `limit` bytes, and whether it was cut. Past the limit tamesu
    stops reading and says so (a `response_truncated` event); a cut body that says it is JSON fails the
    turn, since half a document cannot be read for the reply, its tool calls or what an assertion checks."""
    headers = response.headers
    reading = reading_of(headers, limit)
    content = await _read(response, reading)
    if not reading.cut:
        text = content.decode(text_encoding(headers), errors="replace")
    else:
        # a cut body may end inside a character: an incremental decoder drops only that unfinished tail
        text = codecs.getincrementaldecoder(text_encoding(headers))(errors="replace").decode(content, final=False)
        text = session.redactor.cut_end(text)  # the bound may fall inside a secret: its head is no answer
        reading.record(session, "the answer")
        content_type = headers.get("content-type", "")
        if is_json_type(content_type) and response.status < 400:
            raise TurnError(f"{reading.note('the JSON answer')}: a cut JSON document cannot be read (raise "
                            f"the target's max_response_bytes to read it): {excerpt(text)}",
                            raw=_stand_in(text, reading, session.redactor), status=response.status)
    return text, reading.cut


def text_encoding(headers: Mapping[str, str]) -> str:
    """The encoding httpx's `Response.encoding` gives an answer with these headers (its default is UTF-8): the
    content type's charset when Python knows it. A content type that names no charset, nearly every agent's,
    needs no parse."""
    content_type = headers.get("content-type", "")
    if "charset" not in content_type.lower():
        return "utf-8"
    return _charset(content_type)


@functools.lru_cache(maxsize=64)
def _charset(content_type: str) -> str:
    # as httpx reads it: through an email message's parameters, then looked up
    message = email.message.Message()
    message["content-type"] = content_type
    charset = message.get_content_charset(failobj=None)
    if charset is None:
        return "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        return "utf-8"
    return charset


def answer_body(status: int, headers: Mapping[str, str], text: str, cut: bool) -> JSONValue:
    """The body as the turn keeps it: JSON when it is JSON, else the text (a cut text is never parsed)."""
    if cut:
        return text
    # an error page that claims to be JSON is still reported by its status, not as malformed
    content_type = headers.get("content-type", "") if status < 400 else ""
    return parse_body(text, content_type)


def _stand_in(text: str, reading: Reading, redactor: Redactor) -> dict[str, object]:
    return {"truncated": True, "bytes_read": reading.read, "bytes": reading.declared,
            "excerpt": redactor.cut_end(text[:2000])}


async def _read(response: aiohttp.ClientResponse, reading: Reading) -> bytes:
    parts: list[bytes] = []
    try:
        if reading.declared is not None and reading.declared <= reading.limit:
            # its length said, within the limit, and not compressed (`reading_of`): the framing ends it there, so
            # it is read whole, without the two generators a body read piece by piece goes through
            content = await whole(response)
            reading.read = len(content)
            return content
        async for chunk in bounded_chunks(chunks(response), response.headers.get("content-encoding", ""), reading):
            parts.append(chunk)
    except httpx.HTTPError as exc:
        raise TurnError(f"the answer broke off: {os_reason(exc)}", status=response.status) from exc
    return b"".join(parts)
