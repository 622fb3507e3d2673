"""A server at the target's url that is no A2A endpoint at all: what it answered a call of the agent's protocol
with HTTP 2xx is a web page, plain text, or JSON of another shape (a web site, another JSON API, a health check).

No agent read the request, so there is no answer of the agent's to grade: where tamesu was sent is wrong, as with a
404 or a 405 (`_errors.refused`), the infrastructure's (exit 3), not the agent's failure. An answer that is A2A's
kind but broken (JSON cut short, a JSON-RPC reply without a result, a task without a status) stays the agent's.
The check sits under the SDK, in the session's httpx transport, where the status, the content type and the body are
all at hand: every JSON-RPC call, and HTTP+JSON's sending of a message (the card's fetch, which may miss, is not).
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx

from tamesu.targets._web_page import is_web_page, page_title

JSONRPC_KEYS = frozenset({"jsonrpc", "result", "error"})
"""A JSON-RPC reply has at least one of these: one with none was written by something else."""
HTTP_JSON_KEYS = frozenset({
    "task", "message", "msg", "statusUpdate", "artifactUpdate",  # a send's and a stream's answers (1.0, 0.3)
    "kind", "messageId", "contextId", "taskId", "artifacts", "parts", "role",  # 0.3's task, message and events
    "error", "details", "result", "jsonrpc",  # an error (google.rpc.Status, 0.3's, JSON-RPC's)
    "tasks", "pushNotificationConfig", "configs",  # a list of tasks, push configs
})
"""Top-level keys one of which every HTTP+JSON answer of either A2A version has."""
_SHOWN = 60


class NotA2A(httpx.DecodingError):
    """Raised from the transport: `url` answered `said` (what came back) to a call of A2A's."""

    def __init__(self, said: str, request: httpx.Request) -> None:
        super().__init__(said, request=request)
        self.said = said
        self.url = str(request.url)


def sends_a_message(request: httpx.Request) -> bool:
    """An HTTP+JSON call whose answer is checked: a message sent (`message:send`, `message:stream`), which any turn
    begins with. Its other calls (a task read, a card, push configs) follow one that was an A2A answer."""
    return request.method == "POST" and urlsplit(str(request.url)).path.endswith(("/message:send",
                                                                                  "/message:stream"))


def not_a2a(status: int, content_type: str, body: bytes, jsonrpc: bool) -> str | None:
    """What came back, said, when a 2xx answer to an A2A call (`jsonrpc`: over JSON-RPC, else HTTP+JSON) is of
    no A2A kind; None when it may be A2A's (then the SDK reads it and says what is wrong with it)."""
    if not 200 <= status < 300 or content_type.startswith("text/event-stream"):
        return None
    text = body.decode("utf-8", "replace")
    shown_type = f" ({content_type.split(';')[0].strip()})" if content_type else ""
    if is_web_page(text):
        title = page_title(text)
        named = f" titled '{title}'" if title else ""
        return f"HTTP {status} and a web page{named}{shown_type}"
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        return None  # nothing at all: the SDK's words for an empty answer say it
    if stripped[0] not in "{[":
        return f"HTTP {status} and text, not JSON{shown_type}: {_excerpt(stripped)!r}"
    try:
        document = json.loads(stripped)
    except (ValueError, RecursionError):
        return None  # JSON cut short or broken: an answer the SDK reads as the agent's
    keys = JSONRPC_KEYS if jsonrpc else HTTP_JSON_KEYS
    if isinstance(document, dict) and keys & document.keys():
        return None
    what = "JSON-RPC" if jsonrpc else "A2A's HTTP+JSON"
    return f"HTTP {status} and JSON that is not {what}{shown_type}: {_excerpt(stripped)!r}"


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SHOWN else flat[:_SHOWN] + "..."
