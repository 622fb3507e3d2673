"""What went wrong in a call to the agent, told apart: never reached it, or an answer that is an error.

The SDK raises one exception family for every binding; the cause chain says what happened underneath. A
protocol error keeps its JSON-RPC code whatever the binding (HTTP+JSON and gRPC errors are mapped back to
the code of the same A2A error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import httpx
from a2a.utils.errors import A2A_REASON_TO_ERROR, JSON_RPC_ERROR_CODE_MAP, A2AError

from tamesu.conversation import TurnError
from tamesu.errors import InfraError
from tamesu.matching import one_line
from tamesu.net.bounded import is_too_large
from tamesu.net.clients import os_reason
from tamesu.net.rate_limit import still_limited
from tamesu.net.urls import REFUSAL_HINTS, shown_url
from tamesu.targets._web_page import is_web_page, page_title
from tamesu.targets.a2a._jsonrpc_ids import JsonRpcIdMismatch
from tamesu.targets.a2a._not_a2a import NotA2A
from tamesu.targets.a2a._transport import PREFERRED_HERE, Choice
from tamesu.types import JSONObject

SDK_ERRORS: tuple[type[BaseException], ...] = (A2AError, grpc.aio.AioRpcError, httpx.HTTPError, ValueError)
"""What a call through the SDK raises when the agent (or what it answered) is at fault; ValueError is the
SDK's word for an answer it cannot read."""

_JSONRPC_TEXT = re.compile(r"JSON-RPC Error (-?\d+): (.*)", re.DOTALL)
_GRPC_TEXT = re.compile(r"gRPC Error (\w+): (.*)", re.DOTALL)


_NEVER_REACHED = ("connect", "refused", "resolv", "lookup", "dns", "no route", "unreachable", "empty address")
"""Words of gRPC UNAVAILABLE details that mean the call never got to the agent (retried, then exit 3)."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 10 and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def unreachable(exc: BaseException) -> str | None:
    """Why a call never reached the agent (refused, unresolved, connect timeout), or None when it did."""
    for link in _chain(exc):
        if isinstance(link, httpx.ConnectTimeout | httpx.PoolTimeout):
            return "connect timed out"
        if isinstance(link, httpx.ConnectError):
            return os_reason(link)
        if isinstance(link, grpc.aio.AioRpcError) and link.code() == grpc.StatusCode.UNAVAILABLE:
            details = link.details() or ""
            # UNAVAILABLE also means "the connection broke after the call went out"; only a failed
            # connect is safe to retry.
            if any(word in details.lower() for word in _NEVER_REACHED):
                return one_line(details, 200)
    return None


def speaks_http1(reason: str) -> bool:
    """Whether gRPC's words for a failed connect say the server answered, in HTTP/1 ("Trying to connect an
    http1.x server", "Failed parsing HTTP/2": its first bytes were no HTTP/2 frame)."""
    lowered = reason.lower()
    return "http1.x" in lowered or "parsing http/2" in lowered


def broken_off(exc: BaseException) -> bool:
    """The connection broke while an answer was being read (a stream dropped half-way)."""
    for link in _chain(exc):
        if isinstance(link, httpx.TransportError) and not isinstance(link, httpx.ConnectError | httpx.TimeoutException):
            return True
        if isinstance(link, grpc.aio.AioRpcError) and link.code() in (
                grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED):
            return True
    return False


@dataclass
class AgentError:
    """An error the agent answered, as the turn reports it."""

    message: str
    code: int | None = None
    status: int | None = None
    own: bool = False
    """tamesu's own refusal of the answer (larger than max_response_bytes): said as it is."""
    too_large_grpc: str | None = None
    """The details of a gRPC message the channel refused for its size."""
    grpc_refusal: str | None = None
    """A gRPC status the server (an interceptor, a proxy) answered before any agent read the call, with no A2A
    error in it: UNAUTHENTICATED, PERMISSION_DENIED, UNIMPLEMENTED (gRPC's 401, 403 and 404)."""
    not_a2a_at: str | None = None
    """The url of a server that is no A2A endpoint (`_not_a2a`): `message` says what it answered."""

    def describe(self) -> str:
        if self.own:
            return self.message
        if self.code is not None:
            return f"the agent answered error {self.code}: {self.message}"
        if self.status is not None:
            return f"the agent answered HTTP {self.status}: {self.message}"
        return f"the agent answered an error: {self.message}"

    def raw(self) -> JSONObject:
        error: JSONObject = {"message": self.message}
        if self.code is not None:
            error["code"] = self.code
        if self.status is not None:
            error["status"] = self.status
        return {"error": error}


METHOD_NOT_FOUND = -32601


def described(error: AgentError, choice: Choice) -> str:
    """The error as a turn reports it. A JSON-RPC agent that has no such method most likely speaks another A2A
    version than the one tamesu spoke (0.3's `message/send`, 1.0's `SendMessage`), which the card chose: said."""
    said = error.describe()
    if error.message.startswith("Invalid JSON-RPC response") and choice.reason.startswith("no agent card"):
        # no card and no JSON-RPC answer: most likely another JSON API than an A2A agent's (a rest agent's /chat)
        return f"{said} (and no agent card was found: is url an A2A agent's endpoint?)"
    if error.code != METHOD_NOT_FOUND or choice.binding != "JSONRPC":
        return said
    if choice.reason.startswith("no agent card"):
        return f"{said} (tamesu spoke A2A {choice.shown_version}, with no agent card to name the version)"
    return (f"{said} (tamesu spoke A2A {choice.shown_version}, the version the agent card names for this "
            "interface: does the agent speak it?)")


def failure(error: AgentError, retries: int, what: str, choice: Choice, url: str,
            mask: Callable[[str], str], runs_going: int = 1) -> InfraError | TurnError:
    """What a turn the agent answered with an error raises: a 429 that outlasted `retries` and a refusal before any
    agent read the request are the infrastructure's (exit 3), anything else the agent's answer (the turn fails)."""
    if (limited := still_rate_limited(error, retries, what, runs_going)) is not None:
        return limited
    # at the target's own url too: a wrong path is seen only in the url it refused
    where = card_gave(choice, url, mask) or f" at {shown_url(url, mask)}"
    if (refusal := refused(error, what, where, spoken_as(choice, url))) is not None:
        return refusal
    if error.not_a2a_at is not None:
        return not_an_endpoint(error, what, choice, url, mask)
    return TurnError(described(error, choice), raw=error.raw(), status=error.status)


def still_rate_limited(error: AgentError, retries: int, what: str, runs_going: int = 1) -> InfraError | None:
    """A 429 after `retries` sends again (net.rate_limit, beneath the SDK): no answer of the agent's to grade, so
    an infrastructure error, not a failed turn; with `retries` 0 the 429 is the agent's error."""
    if error.status != 429 or retries == 0:
        return None
    return InfraError(f"{what}: {still_limited(retries + 1, runs_going)} (rate_limit_retries: 0 takes a 429 as "
                      "the agent's error)")




def card_gave(choice: Choice, url: str, mask: Callable[[str], str]) -> str:
    """Where a request went when the card, not the target's url, named it: said with a refusal, which otherwise
    sends the user to check a url the request never went to."""
    named = card_named(choice, url, mask)
    return f" at {shown_url(choice.url, mask)}, {named}" if named else ""


def card_named(choice: Choice, url: str, mask: Callable[[str], str]) -> str:
    """`the B interface the agent card gives for url U` when the card sent requests elsewhere than url; else
    empty."""
    if choice.at(url):
        return ""
    return f"the {choice.binding} interface the agent card gives for url {shown_url(url, mask)}"


def spoken_as(choice: Choice, url: str) -> str:
    """How a request to url was spoken when the card alone chose the binding: said with a refusal of the path or
    the method, which at the right url means the card named the wrong binding there (a request the card sent
    elsewhere is `card_gave`'s to say)."""
    if choice.reason != PREFERRED_HERE or not choice.at(url):
        return ""
    return (f" (spoken as {choice.binding} (A2A {choice.shown_version}), the binding the agent card names for url: "
            "set transport if the agent speaks another there)")


def refused(error: AgentError, what: str, where: str = "", spoken: str = "") -> InfraError | None:
    """HTTP 401, 403, 404 or 405, or a redirect: the server refused the request before any agent read it (an A2A
    agent's own errors are its protocol's, in a 200): where tamesu was sent is wrong, as for an MCP server, not the
    agent. `where` is `card_gave`'s, `spoken` `spoken_as`'s (said of a wrong path or method, not of credentials)."""
    if error.status is not None and 300 <= error.status < 400:
        # an A2A client follows no redirect (a wrong path, or one a trailing / away, read as the agent's answer)
        return InfraError(f"{what}: the agent's server redirected the request{where}{spoken}: HTTP {error.status} "
                          f"({error.message}): does url name the agent's endpoint exactly (a trailing /)?")
    if error.grpc_refusal is not None:
        wrong_service = spoken if error.grpc_refusal == "UNIMPLEMENTED" else ""
        return InfraError(f"{what}: the agent's server refused the call{where}{wrong_service}: {error.message}: "
                          f"{_GRPC_HINTS[error.grpc_refusal]}")
    if error.status not in REFUSAL_HINTS:
        return None
    wrong_path = spoken if error.status in (404, 405, 501) else ""
    return InfraError(f"{what}: the agent's server refused the request{where}{wrong_path}: HTTP {error.status} "
                      f"({error.message}): {REFUSAL_HINTS[error.status]}")


def not_an_endpoint(error: AgentError, what: str, choice: Choice, url: str, mask: Callable[[str], str]) -> InfraError:
    """A server that answered a call of A2A's with something of no A2A kind (`_not_a2a`): no agent read it, so
    where tamesu was sent is wrong (exit 3), as with a 404. One line: where, what came back, what to check."""
    where = card_gave(choice, url, mask)
    missing = " (and no agent card was found)" if choice.reason.startswith("no agent card") else ""
    return InfraError(mask(f"{what}: {error.not_a2a_at} is not an A2A endpoint: it answered {choice.binding} "
                           f"(A2A {choice.shown_version}){where} with {error.message}{missing}: does url name the "
                           "agent's A2A endpoint (a web page answers for a site, a sign-in or a proxy; another API "
                           "answers JSON of its own)?"))


def agent_error(exc: BaseException) -> AgentError:
    """The error an exception from the SDK stands for."""
    for link in _chain(exc):
        if isinstance(link, JsonRpcIdMismatch):
            return AgentError(str(link))
        if isinstance(link, NotA2A):
            return AgentError(link.said, not_a2a_at=link.url)
        if is_too_large(link):
            return AgentError(f"{link} (raise the target's max_response_bytes to read it)", own=True)
        if isinstance(link, grpc.aio.AioRpcError) and link.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and \
                "larger than max" in (link.details() or ""):
            details = _one_line(link.details() or "")
            if details.startswith("SERVER:"):  # gRPC's core says which side refused: the agent, our message
                return AgentError(f"the agent refused the message: it is larger than the agent takes ({details}; "
                                  "its grpc.max_receive_message_length)")
            return AgentError(f"a gRPC message of the answer was larger than max_response_bytes, then refused "
                              f"({details}; raise the target's max_response_bytes to read it)", own=True,
                              too_large_grpc=details)
        if isinstance(link, grpc.aio.AioRpcError) and link.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            # the SDK words every DEADLINE_EXCEEDED as "Client Request timed out"; tamesu's turns set no gRPC
            # deadline, so this is the agent's (or a proxy's) status, said as it was sent
            return AgentError(f"gRPC DEADLINE_EXCEEDED: {_one_line(link.details() or 'no details')}")
    for link in _chain(exc):
        if isinstance(link, httpx.HTTPStatusError):
            plain = _http_error(link.response)
            if plain.code is None and plain.status in REFUSAL_HINTS:
                # a 404 with no A2A error in it is a server's, not an agent's TaskNotFound: the SDK names it
                # MethodNotFound (-32601), which read as the agent's answer (exit 1, fault agent)
                return plain
        if isinstance(link, json.JSONDecodeError):
            return _not_json(link)
    if isinstance(exc, A2AError) and type(exc) in JSON_RPC_ERROR_CODE_MAP:
        return AgentError(_one_line(exc.message), code=JSON_RPC_ERROR_CODE_MAP[type(exc)])
    text = str(exc.message if isinstance(exc, A2AError) else exc)
    match = _JSONRPC_TEXT.match(text)
    if match:
        return AgentError(_one_line(match.group(2)), code=int(match.group(1)))
    for link in _chain(exc):
        if isinstance(link, httpx.HTTPStatusError):
            return _http_error(link.response)
    match = _GRPC_TEXT.match(text)
    if match:
        said = f"gRPC {match.group(1)}: {_one_line(match.group(2))}"
        return AgentError(said, grpc_refusal=match.group(1) if match.group(1) in _GRPC_HINTS else None)
    return AgentError(_one_line(text) or type(exc).__name__)


def _not_json(error: json.JSONDecodeError) -> AgentError:
    """An answer that is no JSON, said as what it is (it was only "JSON Decode Error: Expecting value: line 1
    column 1 (char 0)"): a web page by its title, else the text around where it stopped being JSON."""
    body = error.doc if isinstance(error.doc, str) else ""
    if is_web_page(body):
        title = page_title(body)
        named = f", titled '{title}'" if title else ""
        return AgentError(f"a web page{named}, not an A2A answer: is url the agent's A2A endpoint (a page behind a "
                          "sign-in or proxy, or the site itself, answers HTML)?")
    start = max(0, error.pos - 60)
    shown = ("..." if start else "") + body[start:error.pos + 20] + ("..." if error.pos + 20 < len(body) else "")
    cut = " (cut short?)" if error.pos >= len(body.rstrip()) else ""
    return AgentError(f"an answer that is not JSON{cut}: {error.msg} at character {error.pos} of {len(body)}: "
                      f"{_one_line(shown)!r}")


def _http_error(response: httpx.Response) -> AgentError:
    """An HTTP+JSON error answer. Agents write it as a google.rpc.Status with an A2A ErrorInfo (1.0), as
    `{"type": "InvalidParamsError", "message"}` (a2a-sdk 0.3) or as a JSON-RPC error object; the SDK's
    client reads only its own version's form, so every form is read here."""
    status = response.status_code
    try:
        body = response.json()
    except (ValueError, httpx.ResponseNotRead, UnicodeDecodeError):
        body = None
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = _one_line(str(error.get("message", "")))
        for detail in error.get("details") or []:
            if isinstance(detail, dict) and detail.get("domain") == "a2a-protocol.org":
                kind = A2A_REASON_TO_ERROR.get(str(detail.get("reason")))
                if kind in JSON_RPC_ERROR_CODE_MAP:
                    return AgentError(message, code=JSON_RPC_ERROR_CODE_MAP[kind], status=status)
        by_name = _ERRORS_BY_NAME.get(str(error.get("type")))
        if by_name is not None:
            return AgentError(message, code=JSON_RPC_ERROR_CODE_MAP[by_name], status=status)
        code = error.get("code")
        if isinstance(code, int) and code < 0:
            return AgentError(message, code=code, status=status)
    try:
        text = response.text
    except httpx.ResponseNotRead:
        text = ""
    if is_web_page(text) and (title := page_title(text)):  # a server's error page: its markup is no words
        return AgentError(f"a web page, titled '{title}'", status=status)
    return AgentError(one_line(text, 200) or response.reason_phrase or "", status=status)


_ERRORS_BY_NAME = {kind.__name__: kind for kind in JSON_RPC_ERROR_CODE_MAP}
_GRPC_HINTS = {"UNAUTHENTICATED": REFUSAL_HINTS[401], "PERMISSION_DENIED": REFUSAL_HINTS[403],
               "UNIMPLEMENTED": "does the server at url serve A2A over gRPC (which version)?"}


def _one_line(text: str) -> str:
    # cut with its `…`, which masking reads as a cut: a secret the cut falls in never shows its head
    return one_line(str(text), 500)
