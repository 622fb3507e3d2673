"""The page's own failures on the run's timeline: an uncaught script error (`page_error`), a line the page logs
as an error (`page_console_error`), a call its script makes that fails or answers 4xx/5xx (`page_request_failed`),
the first 20 of each kind a run. A widget whose backend is down then reads as that, not as an agent that said
nothing, and a chat turn that got no answer names the first of them since it was sent."""

from __future__ import annotations

from playwright.async_api import ConsoleMessage, Error, Page, Request, Response

from tamesu.conversation import Event, Session
from tamesu.matching import one_line

LIMIT = 20
"""Events of each kind a run keeps: a page that logs in a loop must not fill the result."""
_CALLS = ("fetch", "xhr", "eventsource", "websocket")
"""What a page's script asks for: an image or a font that is missing is the site's look, not its answers."""
_NOT_FAILURES = ("net::ERR_BLOCKED_BY_CLIENT", "net::ERR_ABORTED")
"""Aborted by tamesu (allowed_domains, a mock) or by the page itself (a navigation away, an AbortController)."""


def watch(page: Page, session: Session) -> None:
    page.on("pageerror", lambda error: _page_error(session, error))
    page.on("console", lambda message: _console(session, message))
    page.on("requestfailed", lambda request: _request_failed(session, page, request))
    page.on("response", lambda response: _response(session, page, response))


def _room(session: Session, name: str) -> bool:
    """Whether one more `name` event is kept; the first one past the limit says that later ones are not."""
    if sum(e.name == name for e in session.events) < LIMIT:
        return True
    if not any(e.name == "page_events_cut" and e.data.get("kind") == name for e in session.events):
        session.event("page_events_cut", kind=name, kept=LIMIT,
                      hint=f"the page had more {name} events than the first {LIMIT}, which are kept; the trace has all")
    return False


def _page_error(session: Session, error: Error) -> None:
    if _room(session, "page_error"):
        session.event("page_error", message=_line(str(getattr(error, "message", error))))


_NETWORK_LOG = "Failed to load resource"
"""Chromium's own console line for every request that failed, a missing picture's too: the calls that matter are
`page_request_failed` already."""


def _console(session: Session, message: ConsoleMessage) -> None:
    if message.type == "error" and not message.text.startswith(_NETWORK_LOG) and _room(session, "page_console_error"):
        session.event("page_console_error", message=_line(message.text))


def _counts(page: Page, request: Request) -> bool:
    """A call of the page's script (any frame's), or a frame's document: the main document is `page_status`."""
    if request.resource_type in _CALLS:
        return True
    return request.resource_type == "document" and request.frame != page.main_frame


def _request_failed(session: Session, page: Page, request: Request) -> None:
    failure = request.failure or "failed"
    if _counts(page, request) and not failure.startswith(_NOT_FAILURES) and _room(session, "page_request_failed"):
        session.event("page_request_failed", method=request.method, url=request.url, failure=_line(failure),
                      resource=request.resource_type)


def _response(session: Session, page: Page, response: Response) -> None:
    if response.status >= 400 and _counts(page, response.request) and _room(session, "page_request_failed"):
        session.event("page_request_failed", method=response.request.method, url=response.url,
                      status=response.status, failure=f"{response.status} {response.status_text}".strip(),
                      resource=response.request.resource_type)


def failed_meanwhile(events: list[Event], before: int) -> str:
    """The page's own failures since event `before`, as a hint for a turn that got no answer: the first of each."""
    said = []
    for name, words in (("page_error", "the page's script failed meanwhile: {message}"),
                        ("page_request_failed", "the page's request {method} {url} failed meanwhile: {failure}"),
                        ("page_console_error", "the page logged an error meanwhile: {message}")):
        first = next((e for e in events[before:] if e.name == name), None)
        if first is not None:
            said.append(words.format(**{k: str(v) for k, v in first.data.items()}))
    return "".join(f"; {line}" for line in said)


def _line(text: str) -> str:
    return one_line((text.strip().splitlines() or [""])[0], 300)
