"""How the rest target builds a request: the default body of a turn (and a websocket message's trace), a URL
relative to the target's, and which statuses count as success."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx

from tamesu.conversation import TurnError, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.net.direct import Request
from tamesu.suite.templates import TEMPLATE, Context
from tamesu.targets.rest.http import Answer, Http, excerpt
from tamesu.targets.rest.read import as_text, describe_keys
from tamesu.targets.rest.spec import PollSpec, RequestSpec, RestSpec
from tamesu.telemetry.traceparent import TraceContext


def request_body(ctx: Context, turn: UserTurn, request: RequestSpec, session_id: str | None,
                 method: str = "POST") -> tuple[object, bool]:
    """The body `request.body` renders, or the default one (none for a GET or HEAD: the words go in the URL's
    templates); and whether there is a body at all."""
    if "body" in request.model_fields_set:
        return (None, False) if request.body is None else (ctx.render_value(request.body), True)
    if method in ("GET", "HEAD"):
        return None, False
    body: dict[str, object] = {"message": turn.text, "session_id": session_id}
    if turn.data is not None:
        body["data"] = turn.data
    if turn.history:
        body["messages"] = turn.messages()
    if turn.options:
        body["options"] = turn.options
    if (turn.files or any(m.files for m in turn.history)) and request.multipart is None:
        body["attachments"] = ctx.lookup("attachments")
    return body, True


def rendered_headers(ctx: Context, headers: dict[str, str]) -> dict[str, str]:
    return {name: ctx.render_text(value) for name, value in headers.items()}


def trace_values(trace: TraceContext | None) -> dict[str, str]:
    """`{{trace.traceparent}}` and `{{trace.id}}`: the turn's W3C trace, for a body or header of the suite's."""
    return {"traceparent": trace.traceparent, "id": trace.trace_id} if trace is not None else {}


def message_with_trace(body: object, ctx: Context, spec: RestSpec, trace: TraceContext | None) -> object:
    """A websocket's default message with `"traceparent"`: its headers went with the handshake, before any
    turn. The suite's own `traceparent` header wins; a body of the suite's own is left as written."""
    if "body" in spec.request.model_fields_set or not isinstance(body, dict):
        return body
    own = next((value for name, value in spec.headers.items() if name.lower() == "traceparent"), None)
    value = ctx.render_text(own) if own is not None else trace.traceparent if trace is not None else None
    return {**body, "traceparent": value} if value else body


def render_url(ctx: Context, template: str) -> str:
    """`template` rendered, each template in a query parameter's value (`?q={{message}}`) percent-encoded as one:
    written as is, the user's `&` or `#` cut the message short and its `+` arrived as a space. A template that
    is no parameter's value (`{{env.AGENT_URL}}/chat`, `?{{vars.params}}`) is left as written."""
    head, mark, query = template.partition("?")
    if not mark or "{{" not in query:
        return ctx.render_url(template)

    def encoded(match: re.Match[str]) -> str:
        name = query[query.rfind("&", 0, match.start()) + 1:match.start()]
        if "=" not in name:
            return match.group(0)
        return quote(as_text(ctx.lookup(match.group(1))), safe="")

    return ctx.render_url(head + mark + TEMPLATE.sub(encoded, query))


def build_poll(http: Http, poll: PollSpec, ctx: Context, target_url: str, headers: dict[str, str],
               sent: Answer) -> Request:
    """The poll's request, its templates rendered with the send's answer as `{{response.X}}` (`headers`: the
    target's, then the poll's own). One naming what that answer lacks fails the turn, saying what it held."""
    try:
        return http.build(poll.method.upper(), resolve_url(render_url(ctx, poll.url), target_url, ctx),
                          {name: ctx.render_text(value) for name, value in headers.items()},
                          ctx.render_value(poll.body), has_body=poll.body is not None)
    except TemplateError as exc:
        held = f" ({describe_keys(sent.body)})" if isinstance(sent.body, dict | list) else ""
        raise TurnError(f"poll: {exc}: the send answered HTTP {sent.status} {excerpt(sent.body)}{held}",
                        raw=sent.body, status=sent.status) from None


def resolve_url(url: str, target_url: str, ctx: Context, what: str = "rest target") -> str:
    """A URL without a scheme goes to the scheme, host and port of the target's `url` (ws:// as http://); a
    target `url` its templates make into no URL is an InfraError, as a turn's request says it."""
    if "://" in url:
        return url

    def known(match: re.Match[str]) -> str:
        # Only the origin is kept, so a template that has no value yet ({{session.id}}) may stay blank.
        try:
            return as_text(ctx.lookup(match.group(1)))
        except TemplateError:
            return "_"

    rendered = TEMPLATE.sub(known, target_url)
    try:
        base = httpx.URL(rendered)
    except httpx.InvalidURL as exc:  # was 'internal error: InvalidURL' before session.open was sent
        raise InfraError(f"{what}: {rendered}: not a URL ({exc})") from None
    scheme = {"ws": "http", "wss": "https"}.get(base.scheme, base.scheme)
    return str(base.copy_with(scheme=scheme, path="/", query=None, fragment=None).join(url))


def status_expected(status: int, expected: list[int] | int | None) -> bool:
    if expected is None:
        return 200 <= status < 300
    return status in (expected if isinstance(expected, list) else [expected])
