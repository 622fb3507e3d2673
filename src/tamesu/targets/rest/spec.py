"""The keys of a `rest` target, as a user writes them. Documented key by key in `tamesu.targets.rest.target`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from tamesu.suite.hooks_spec import http_method
from tamesu.suite.schema import Duration, Strict
from tamesu.suite.templates import references, walk_strings
from tamesu.targets.base import SessionOpenSpec, SessionSpec, TargetSpec, check_path
from tamesu.types import HostPort, HttpHeaders, YamlInt, fixed_port

JsonPath = Annotated[str, AfterValidator(check_path)]


class PathEquals(Strict):
    """A condition that holds when the JSONPath finds `equals`: `{path: $.type, equals: done}`."""

    path: JsonPath
    """The JSONPath looked up."""
    equals: object
    """The value it must find for the condition to hold."""


def _condition(value: object) -> str | PathEquals:
    # Validated by hand so an error sits at the key the user wrote, not under a union branch's name.
    if isinstance(value, str):
        return check_path(value)
    if isinstance(value, PathEquals):
        return value
    if isinstance(value, dict):
        try:
            return PathEquals.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            message = message[:1].lower() + message[1:]  # worded as the loader words every other problem
            if first["type"] != "value_error" and not isinstance(first.get("input"), dict | list):
                message += f", got {first.get('input')!r}"
            raise ValueError(f"{where}: {message}" if where else message) from None
    raise ValueError("expected a JSONPath, or {path: <JSONPath>, equals: <value>}")


Condition = Annotated[str | PathEquals, PlainValidator(_condition)]
"""A JSONPath that holds when it finds a truthy value, or a `{path, equals}` comparison."""


class MultipartSpec(Strict):
    """Send the turn as multipart/form-data: the body's keys as form fields, each attachment as a file."""

    files: str = Field("files", min_length=1)
    """The form field every attachment is sent under."""


def _multipart(value: object) -> object:
    if value is True:
        return MultipartSpec()
    if value is False:
        return None
    return value


class RequestSpec(Strict):
    body: object = None
    """JSON with templates. Absent: `{"message": "{{message}}", "session_id": "{{session}}"}` (+ `data`,
    `messages`, `options`, `attachments` when the turn has them); none for `method: GET` or `HEAD`."""
    multipart: Annotated[MultipartSpec | None, BeforeValidator(_multipart)] = None
    """`true` (or `{files: FIELD}`): multipart/form-data, the files as file parts (not base64 in JSON)."""

    @model_validator(mode="after")
    def _form_fields(self) -> RequestSpec:
        if self.multipart is not None and self.body is not None and not isinstance(self.body, dict):
            raise ValueError("multipart sends the body's keys as form fields: body must be a mapping")
        return self

    def mentions_attachments(self) -> bool:
        """The body template names `{{attachments}}` (or one of them) somewhere."""
        return any(expr == "attachments" or expr.startswith("attachments.")
                   for _, text in walk_strings(self.body) for expr, _ in references(text))


class PollSpec(Strict):
    """The reply is read from a second endpoint, polled until it holds text (or `done`)."""

    url: str
    """The endpoint polled for the answer; templates allowed (`{{response.job_id}}` of the turn's first response)."""
    method: str = "GET"
    """The HTTP method of each poll."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Headers sent with each poll; templates allowed."""
    body: object = None
    """The JSON body of each poll, if any; templates allowed."""
    interval: Duration = 0.5
    """The pause between polls."""
    timeout: Duration | None = Field(None, gt=0)
    """How long to poll before the turn fails; default the target's `turn_timeout`."""
    text: JsonPath = "$.text"
    """JSONPath to the answer's text in a poll's response."""
    done: Condition | None = None
    """A condition on a poll's response that says the answer is complete (default: text is there)."""

    @field_validator("interval")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("interval must be more than 0")
        return value

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        return http_method(value)


class ListenSpec(Strict):
    """The reply is what the agent posts to an API tamesu serves at `{{listen.url}}`."""

    path: str = "/"
    """The path the agent posts its answer to, on the listener tamesu serves."""
    addr: HostPort | None = None
    """host:port to bind; default 127.0.0.1 on a free port. Runs whose listener binds a fixed port are made one at
    a time under --parallel, as those of remote agents on a fixed `addr`."""
    url: str | None = None
    """The URL the agent reaches the listener at (a tunnel); default the listener's own address + path. Needs an
    `addr` with a port: the url leads to a fixed port, not to the free one the listener takes without it."""
    text: JsonPath = "$.text"
    """JSONPath to the text in each post."""
    idle: Duration = 1.0
    """How long without a new post, after one with text, ends the turn."""
    done: Condition | None = None
    """A condition on a post that ends the turn at once (the agent's last post)."""

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("the path must start with /")
        return value

    @field_validator("idle")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("idle must be more than 0")
        return value

    @model_validator(mode="after")
    def _url_needs_addr(self) -> ListenSpec:
        # a tunnel leads to a fixed local port: beside a free one, every post the agent made went nowhere and
        # each turn timed out, the agent blamed
        if self.url is not None and fixed_port(self.addr) is None:
            raise ValueError("url needs addr: the port the url leads to, where the listener binds (without "
                             "addr, or with port 0, it takes a free port, which the url cannot know)")
        return self

    def fixed_addr(self) -> str | None:
        """`addr` when it names a port (not 0): the one a run's listener binds as written."""
        return self.addr if fixed_port(self.addr) is not None else None


class ResponseSpec(Strict):
    text: JsonPath = "$.text"
    """JSONPath to the agent's text in the response (or in the final stream event)."""
    tool_calls: JsonPath = "$.tool_calls"
    """JSONPath to the agent's tool calls (`[{name, arguments}]`), for the tool assertions."""
    done: Condition | None = None
    """The agent ended the conversation."""
    delta: JsonPath | None = None
    """A streamed event's text chunk; default `$.delta`, and an event without one contributes its text."""
    final: Condition = "$.done"
    """The streamed event that completes the agent's turn (sse, websocket)."""
    poll: PollSpec | None = None
    """The answer is fetched from a second endpoint, polled until it holds text."""
    listen: ListenSpec | None = None
    """The answer is what the agent posts to an endpoint tamesu serves for the run."""


class RestSessionSpec(SessionSpec):
    id: str | None = None
    """Template of the session id; default a fresh uuid4 hex per run."""
    open: SessionOpenSpec | None = None
    """A request made once per run before the first turn (create a conversation); its `capture` values become
    `{{session.NAME}}`."""

    @field_validator("id")
    @classmethod
    def _not_itself(cls, value: str | None) -> str | None:
        if value is not None and any(expr == "session" for expr, _ in references(value)):
            raise ValueError("session.id cannot use {{session}}, the value it defines")
        return value

    @field_validator("open")
    @classmethod
    def _captures(cls, value: SessionOpenSpec | None) -> SessionOpenSpec | None:
        for name, path in (value.capture if value else {}).items():
            try:
                check_path(path)
            except ValueError as exc:
                raise ValueError(f"capture.{name}: {exc}") from None
        return value


class RestSpec(TargetSpec):
    url: str
    """The agent's endpoint; templates allowed (`{{session.id}}`)."""
    method: str = "POST"
    """The HTTP method of each turn's request."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Headers sent with every turn; templates allowed (`Authorization: Bearer {{secrets.TOKEN}}`)."""
    request: RequestSpec = Field(default_factory=RequestSpec)
    """What each turn's request body is: a template of the user's message, history, files and session."""
    response: ResponseSpec = Field(default_factory=ResponseSpec)
    """Where the agent's answer is in what comes back: its text, tool calls, stream events, a polled or posted reply."""
    streaming: Literal["none", "sse", "websocket"] = "none"
    """`none`: one response per turn; `sse`: a server-sent event stream; `websocket`: messages over one websocket
    per run."""
    session: RestSessionSpec = Field(default_factory=RestSessionSpec)
    """The run's session: its id template, and a request made once before the first turn whose captures become
    `{{session.NAME}}`."""
    rate_limit_retries: YamlInt = Field(3, ge=0, le=10)
    """How often a request the agent answered HTTP 429 (too many requests) is sent again, after its Retry-After
    (at most 30 s) or a doubling `connect.backoff`; still 429 after them is an infrastructure error (exit 3).
    0 takes a 429 as the turn's answer, for a test of the agent's own limit."""

    @field_validator("method")
    @classmethod
    def _upper(cls, value: str) -> str:
        return http_method(value)  # `GE T` was each run's internal error, a traceback

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str) -> str:
        # here, not in _coherent: the problem is then said at the url, not at the target's name
        if not value.startswith(("{{", "http://", "https://", "ws://", "wss://")):
            raise ValueError("url must start with http://, https://, ws:// or wss://")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> RestSpec:
        reply = self.response
        if reply.poll is not None and reply.listen is not None:
            raise ValueError("response.poll and response.listen are two ways to read the reply: keep one")
        if self.streaming != "none" and (reply.poll is not None or reply.listen is not None):
            raise ValueError(f"streaming: {self.streaming} reads the reply from the stream; "
                             "response.poll and response.listen need streaming: none")
        self._within_the_turn()
        if self.streaming == "websocket" and "{{" not in self.url and not self.url.startswith(("ws://", "wss://")):
            raise ValueError("streaming: websocket needs a ws:// or wss:// url")
        if self.streaming != "websocket" and self.url.startswith(("ws://", "wss://")):
            raise ValueError("a ws:// url needs streaming: websocket")
        if self.streaming == "websocket" and self.request.multipart is not None:
            raise ValueError("a websocket sends text messages: request.multipart needs streaming none or sse")
        return self

    def streams_replies(self) -> bool:
        """A reply streamed (sse, websocket), posted back in pieces (`listen`), or perhaps streamed (`streaming` not
        set: the answer's content type says); `streaming: none` and a polled reply come whole."""
        if self.response.listen is not None:
            return True
        return self.response.poll is None and (self.streaming != "none" or "streaming" not in self.model_fields_set)

    def fixed_addrs(self) -> frozenset[str]:
        listen = self.response.listen
        addr = None if listen is None else listen.fixed_addr()
        return frozenset() if addr is None else frozenset({addr})

    def _within_the_turn(self) -> None:
        """`turn_timeout` bounds the whole turn: a poll given longer was cut at it, and a listen that ends only on an
        `idle` as long lost the posts that had come to a turn timeout."""
        reply, limit = self.response, self.turn_timeout
        if reply.poll is not None and reply.poll.timeout is not None and reply.poll.timeout > limit:
            raise ValueError(f"response.poll.timeout ({reply.poll.timeout:g}s) is longer than turn_timeout "
                             f"({limit:g}s), which bounds the whole turn: raise turn_timeout to poll that long")
        poll_limit = reply.poll.timeout or limit if reply.poll is not None else None
        if reply.poll is not None and poll_limit is not None and reply.poll.interval >= poll_limit:
            raise ValueError(f"response.poll.interval ({reply.poll.interval:g}s) is not shorter than the time polls "
                             f"are given ({poll_limit:g}s): it would poll once and give up")
        if reply.listen is not None and reply.listen.done is None and reply.listen.idle >= limit:
            raise ValueError(f"response.listen.idle ({reply.listen.idle:g}s) is not shorter than turn_timeout "
                             f"({limit:g}s) and no listen.done ends the turn: every turn would time out after the "
                             "agent's posts")
