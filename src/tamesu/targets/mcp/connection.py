"""The mcp target's client: one MCP session over stdio or streamable HTTP, and what its answers mean.

The session lives in a task of its own. The `mcp` SDK is built on anyio, whose cancel scopes must be left by
the task that entered them, while the engine closes a target from another task (it shields `close`); a task
that opens the client, waits to be told to stop, then closes it keeps both sides in one task.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx2
import mcp_types
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from tamesu import __version__
from tamesu.matching import quoted
from tamesu.net.aio import OnResend, aio_transport
from tamesu.net.bounded import Record, bounded_transport
from tamesu.net.rate_limit import RateLimit, rate_limited_transport
from tamesu.net.tls import TlsSpec
from tamesu.runtime.children import owner_env
from tamesu.targets._web_page import is_web_page, page_title
from tamesu.targets.mcp._reply_ids import OnStray, StrayReplyTransport
from tamesu.targets.mcp.errlog import MaskedLog
from tamesu.targets.mcp.stdio import bounded_stdio

Transport = AbstractAsyncContextManager[Any]

_PAGES = 100
"""tools/list pages read at most: a server whose cursor never ends cannot hang the start."""
_STOP_GRACE = 10.0
"""How long closing may take: the stdio shutdown waits up to about 6.5 s for a stubborn process."""
_HTTP_READ = 300.0
"""Read timeout of the HTTP client. Calls are bounded by `call_timeout`; this only ends a dead stream."""

CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
REQUEST_TIMEOUT = mcp_types.REQUEST_TIMEOUT


class ConnectionLost(Exception):
    """The server went away (it exited, or the HTTP session ended) and no call can reach it."""


@dataclass
class ServerInfo:
    """What the server said about itself when the session opened."""

    name: str | None
    version: str | None
    protocol_version: str
    instructions: str | None
    tools: list[mcp_types.Tool] = field(default_factory=list)


class StdoutNoise:
    """Lines a stdio server printed on stdout that are not JSON-RPC: kept in its log, counted, never shown. And
    replies whose id no request had (`stray`): the SDK drops them, so each is said (`on_stray`) and kept, for
    the call left waiting to say why it timed out."""

    def __init__(self, errlog: MaskedLog, on_stray: Callable[[object, list[object]], object] | None = None) -> None:
        self._errlog = errlog
        self.lines = 0
        self.first = ""
        self.strays: list[object] = []
        self._on_stray = on_stray

    def stray(self, request_id: object, waiting: list[object]) -> None:
        self.strays.append(request_id)
        with suppress(ValueError, OSError):
            self._errlog.write(f"[stdout, a reply to no request sent] id {request_id!r}\n")
        if self._on_stray is not None:
            self._on_stray(request_id, waiting)

    def stray_note(self) -> str:
        """Why a call may have waited in vain, or "": the server's replies that carried no id tamesu had sent."""
        if not self.strays:
            return ""
        ids = ", ".join(repr(i) for i in self.strays[-3:])
        return f" (the server sent replies with ids no request had: {ids}; an answer under another request's id?)"

    def add(self, line: str) -> None:
        self.lines += 1
        # a cut is marked `…`: a secret the cut falls in is then masked by its head (cut bare, its first
        # characters stayed in the event and the log)
        if not self.first:
            self.first = _cut(line, 120)
        with suppress(ValueError, OSError):  # the log closes with the session
            self._errlog.write(f"[stdout, not JSON-RPC] {_cut(line, 2000)}\n")


def _cut(line: str, most: int) -> str:
    return line if len(line) <= most else line[:most] + "…"


def stdio_transport(command: str, args: list[str], env: dict[str, str], cwd: Path, errlog: MaskedLog,
                    noise: StdoutNoise, max_bytes: int, refused: Record) -> Transport:
    """The server as a child process, seeing only a safe part of our environment (the one the SDK would give
    it) plus `env`; no stdout line is read past `max_bytes` and its envelope (`_mcp_stdio`)."""
    return bounded_stdio(command, args, server_environment(env), cwd, errlog.fileno(), noise, max_bytes, refused)


@asynccontextmanager
async def http_transport(url: str, headers: dict[str, str], connect_timeout: float,
                         errors: list[str] | None = None,
                         traceparent: Callable[[], str | None] | None = None,
                         max_bytes: int | None = None, refused: Record | None = None,
                         resent: OnResend | None = None, tls: TlsSpec | None = None,
                         rate_limit: RateLimit | None = None, on_stray: OnStray | None = None,
                         ) -> AsyncIterator[object]:
    """The server at `url` over streamable HTTP, through `http_client(...)`."""
    async with (
        http_client(headers, connect_timeout, errors, traceparent, max_bytes, refused, resent, tls,
                    rate_limit, on_stray) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def http_client(headers: dict[str, str], connect_timeout: float, errors: list[str] | None = None,
                traceparent: Callable[[], str | None] | None = None, max_bytes: int | None = None,
                refused: Record | None = None, resent: OnResend | None = None,
                tls: TlsSpec | None = None, rate_limit: RateLimit | None = None,
                on_stray: OnStray | None = None) -> httpx2.AsyncClient:
    """The MCP SDK's HTTP client, with `headers` on every request. Each 4xx or 5xx answer is appended to
    `errors` as `HTTP 401 Unauthorized`. A request made while `traceparent()` gives a value (the turn being
    played) carries it as the `traceparent` header, unless `headers` set one. No answer is read past
    `max_bytes` (`refused` is told, and the call fails with `_bounded_http`'s ResponseTooLarge). A POST that
    whose connection ended at once, before any answer, is sent again once on a new one, and `resent` is told
    (`tamesu.net.aio`'s rule: a JSON-RPC message the server never read is safe to send again); `tls` is the
    target's `tls:` block; a 429 is sent again as `rate_limit` says; a reply under an id no request had is the
    call's protocol error, and `on_stray` is told (`_reply_ids`). aiohttp is beneath (`tamesu.net.aio`), the
    environment's proxies honoured."""
    timeout = httpx2.Timeout(connect_timeout, read=_HTTP_READ)

    def bounded(transport: Any) -> Any:
        return transport if max_bytes is None else bounded_transport(httpx2, transport, max_bytes, refused)

    async def seen(response: httpx2.Response) -> None:
        if errors is not None and response.status_code >= 400:
            errors.append(f"HTTP {response.status_code} {response.reason_phrase}".strip())
        elif errors is not None and (said := await _no_mcp_answer(response)) is not None:
            errors.append(said)

    async def stamp(request: httpx2.Request) -> None:
        # the SDK posts from a task of its own, so the turn is read from the session, not from a contextvar
        value = traceparent() if traceparent is not None else None
        if value and "traceparent" not in request.headers:
            request.headers["traceparent"] = value

    return httpx2.AsyncClient(headers=headers, timeout=timeout,
                              transport=StrayReplyTransport(bounded(rate_limited_transport(
                                  httpx2, aio_transport(httpx2, tls=tls, on_resend=resent,
                                                              resend_if=_not_a_tool_call), rate_limit)), on_stray),
                              event_hooks={"request": [stamp], "response": [seen]})


_TOOL_CALL = re.compile(rb'"method"\s*:\s*"tools/call"')


def _not_a_tool_call(request: httpx2.Request) -> bool:
    """A message that may be sent again after a dropped connection: not a `tools/call`, which a server may have
    carried out before it dropped it (a refund made twice, the run none the wiser)."""
    try:
        body = request.content
    except httpx2.RequestNotRead:
        # a request the SDK rebuilt to follow a redirect within the server (`/mcp/` -> `/mcp`) carries the first
        # one's body as a stream, in memory (the transport asks only then) but not read into `content` yet
        body = request.read()
    return _TOOL_CALL.search(body) is None


class McpConnection:
    """One client session, opened by `start`, used by `call` from any task, ended by `stop`."""

    def __init__(self, transport: Callable[[], Transport]) -> None:
        self._transport = transport
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.lost: BaseException | None = None
        """Why the session ended by itself after it started, if it did."""

    async def start(self, timeout: float) -> ServerInfo:
        """Open the session and list the tools, within `timeout`. Raises what went wrong (see `cause`)."""
        ready: asyncio.Future[ServerInfo] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name="tamesu-mcp-session")
        done, _ = await asyncio.wait({ready}, timeout=timeout)
        if not done:
            await self.stop()
            raise TimeoutError(f"no answer to the MCP handshake within {timeout:g}s (connect.timeout)")
        return ready.result()

    async def _hold(self, ready: asyncio.Future[ServerInfo]) -> None:
        try:
            # cache=None: tamesu wants what the server says now, never a listing remembered by the SDK
            async with Client(self._transport(), cache=None,
                              client_info=mcp_types.Implementation(name="tamesu", version=__version__)) as client:
                info = ServerInfo(
                    name=client.server_info.name if client.server_info else None,
                    version=client.server_info.version if client.server_info else None,
                    protocol_version=client.protocol_version,
                    instructions=client.session.instructions,
                    tools=await _all_tools(client),
                )
                self._client = client
                ready.set_result(info)
                await self._stopping.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # the SDK raises exception groups; the reason is kept, never lost
            if not ready.done():
                ready.set_exception(cause(exc))
            elif not self._stopping.is_set():
                self.lost = cause(exc)
        finally:
            self._client = None

    async def call(self, name: str, args: dict[str, Any], timeout: float,
                   traceparent: str | None = None) -> mcp_types.CallToolResult:
        """One tools/call, with `traceparent` in its `_meta` when given (MCP's SEP-414 carrier, the only one a
        stdio server has). Raises MCPError (a protocol error, REQUEST_TIMEOUT, CONNECTION_CLOSED), TimeoutError,
        or ConnectionLost when the session had already ended."""
        client = self._client
        if client is None:
            raise ConnectionLost(describe(self.lost) if self.lost else "the session is not open")
        # RequestParamsMeta is an open TypedDict (extra_items), which mypy does not read yet
        meta = cast(mcp_types.RequestParamsMeta, {"traceparent": traceparent}) if traceparent else None
        # The SDK's own timeout answers REQUEST_TIMEOUT; the outer one only guards against it not firing.
        async with asyncio.timeout(timeout + 2):
            return await client.call_tool(name, args, read_timeout_seconds=timeout, meta=meta)

    async def stop(self) -> None:
        """End the session (a stdio server is stopped by `_mcp_stdio`: stdin closed, then SIGTERM, then SIGKILL)."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is None:
            return
        if self._client is None:
            # Still starting (or already ended): nothing waits for `_stopping` yet, so cancel the handshake.
            task.cancel()
        # asyncio.wait, not wait_for: a task that ignores its cancellation must not hang the run's end.
        done, _ = await asyncio.wait({task}, timeout=_STOP_GRACE)
        if not done:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=_STOP_GRACE)
        if done and not task.cancelled():
            task.exception()  # retrieved: `_hold` already kept what it meant


async def _all_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def cause(exc: BaseException) -> BaseException:
    """The first real failure inside the exception groups the SDK's task groups raise."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def jsonrpc_method(body: bytes) -> str | None:
    """The `method` of a JSON-RPC message posted to the server (None for a reply or what does not parse)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def is_unreached(exc: BaseException) -> bool:
    """The request never got to a server (refused, unresolved, timed out connecting): worth another try."""
    return isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError)


NO_MCP = "HTTP 2"
"""How an answer of no MCP kind begins in the errors `http_client` keeps (`_no_mcp_answer`)."""


async def _no_mcp_answer(response: httpx2.Response) -> str | None:
    """A 2xx answer to a POST that is neither JSON nor an event stream (a web page, plain text), said as what it is:
    a server that is no MCP server (the SDK said only "Unexpected content type")."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not 200 <= response.status_code < 300 or response.request.method != "POST" or not kind or \
            "json" in kind or kind == "text/event-stream":
        return None
    text = (await response.aread()).decode("utf-8", "replace")  # bounded beneath, by max_response_bytes
    if is_web_page(text):
        title = page_title(text)
        return f"HTTP {response.status_code} and a web page{f' titled {title!r}' if title else ''} ({kind})"
    return f"HTTP {response.status_code} and {kind}: {quoted(text, 60)}"


def http_statuses(errors: list[str]) -> str:
    """` (HTTP 405 Method Not Allowed)`, the error statuses the server answered the session's start with, and what
    a 405 most often means; "" when there were none."""
    errors = [error for error in errors if not error.startswith(NO_MCP)]
    if not errors:
        return ""
    said = "; ".join(dict.fromkeys(errors))
    if any(error.startswith("HTTP 405") for error in errors):
        # a server of the older HTTP+SSE transport takes a GET at its url (`/sse`) and refuses the POST
        said += ("; a server that refuses the POST may speak only MCP's older HTTP+SSE transport (a url ending in "
                 "/sse), which tamesu does not: give its streamable HTTP endpoint (often /mcp)")
    return f" ({said})"


def server_environment(env: dict[str, str]) -> dict[str, str]:
    """What a server process sees: the same safe part of our environment the SDK gives a stdio server."""
    return {**get_default_environment(), **owner_env(), **env}


def describe(exc: BaseException) -> str:
    """One line saying what went wrong, in a person's words where the SDK's are cryptic."""
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "the server closed the connection"
        if exc.code == mcp_types.PARSE_ERROR and "validation error" in exc.message:
            # the SDK goes on with pydantic's report, a line per field, of why the answer (a JSON API that is not
            # MCP's, as an agent's own endpoint) is none of JSON-RPC's messages
            return f"MCP error {exc.code}: {exc.message.split(': ', 1)[0]}: the answer is no JSON-RPC message"
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, httpx2.ConnectError):
        return f"cannot connect ({exc})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url}"
    if isinstance(exc, TimeoutError) and str(exc):
        return str(exc)  # McpConnection.start's, which names the setting
    if isinstance(exc, FileNotFoundError):
        return f"cannot start the command: {exc.strerror or exc} ({exc.filename})"
    if isinstance(exc, ValidationError):
        # the SDK's model of an answer the server sent (a tool without inputSchema): what broke, in one line
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"the server's {exc.title} breaks the MCP schema: {where}: {first['msg']}{more}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- answers ---------------------------------------------------------------------------------------------------


def _block_text(block: Any) -> str:
    """A content block as a host shows it to a model: text as it is, anything else named."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {getattr(block, 'mime_type', '')}]".replace(" ]", "]")
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    if kind == "resource":
        resource = block.resource
        return str(getattr(resource, "text", None) or f"[resource {resource.uri}]")
    return f"[{kind or 'content'}]"


def result_text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(_block_text(block) for block in result.content)


def result_value(result: mcp_types.CallToolResult) -> tuple[object, bool]:
    """(the value the model sees and the run records, is it an error).

    The content is what a host shows a model, so it wins: its text, read as JSON when it is a JSON object or
    array (so `tool_called`, `grounded` and judges see structure). Structured content stands in for empty
    content. An error is `{"error": text}`, as the model target writes one.
    """
    text = result_text(result)
    if result.is_error:
        return {"error": text or "the tool failed without saying why"}, True
    if not result.content and result.structured_content is not None:
        return result.structured_content, False
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        with suppress(ValueError):
            return json.loads(stripped), False
    return text, False
