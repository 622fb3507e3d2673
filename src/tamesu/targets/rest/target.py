"""The `rest` target: an agent behind HTTP (JSON, server-sent events, polling, call-backs) or a websocket.

How a turn is sent: `method` `url` with `headers` and `request.body`, all templates rendered per turn with
`{{message}}` (the user's words), `{{session}}` (the session id), `{{session.NAME}}` (session.open captures),
`{{listen.url}}`, `{{vars.x}}`, `{{captured.x}}`, `{{secrets.X}}`, `{{attachments}}` (the files the turn
carries, its history's first: `[{name, media_type, data}]`, data the bytes in base64, or `url` instead of data
for a file the agent fetches), `{{messages}}` (the conversation so far and this turn as [{role, content}], user
and assistant, for an agent that keeps no history of its own; a JSONL test's given history stands for what came
before) and for JSONL tests `{{options.X}}`. Without `request.body` the body is `{"message": ..., "session_id":
...}`, plus `"data"` when the turn carries data, `"messages"` when it carries a history, `"options"` when it
carries options, `"attachments"` when it carries files, `"traceparent"` on a websocket (`{{trace.traceparent}}`
in a body of your own); `body: null` sends none, nor does a GET. `request.multipart: true` (or `{files: FIELD}`)
sends multipart/form-data instead: the body's keys as form fields (text as is, other values as JSON) and each
file as a file part named `files` (or FIELD). A test whose files the request would drop (a body without
`{{attachments}}`, a URL file with multipart) is refused when it loads. A body that renders to a string is sent
as text/plain, anything else as JSON. A URL without a scheme (session.open, poll: `/jobs/{{response.job}}`) goes
to the scheme, host and port of `url`. Poll requests send the target's `headers` and then their own;
session.open, made before the target's headers can name its captures, sends only its own.

How the agent's turn is read, by mode:
- plain (`streaming: none`): the body is the turn's `response` and only `raw` item. Its text is what
  `response.text` finds (several matches are joined by newlines); a body that is not JSON is the text.
- `sse`: each event's `data` (JSON, else text) is one event. The text is the concatenation of the events'
  chunks (`response.delta`, default `$.delta`; while `delta` is unset an event without one gives its
  `response.text`). The turn ends at `data: [DONE]`, at an event where `response.final` holds (default
  `$.done`), or at the end of the stream; a final event's `response.text` that repeats the streamed text
  replaces it. `raw` is every event, `response` the last one (so `json_path` reads the final event), and
  `first_token_at_ms` the arrival of the first event that brought text; NDJSON: a line an event. A non-stream
  answer is read as plain. An error event (`event: error`, `{"type": "error"}`...) or a broken JSON one fails
  the turn (`stream_errors`).
- `websocket`: one connection per session, opened in `open()`; each turn sends the rendered body as one text
  message (JSON; a body that renders to a string goes as is) and reads messages as sse reads events, until
  `[DONE]` or `response.final` holds (a turn never ends on silence: an agent that answers with one message
  per turn sets `final: $.text`). Messages that arrive between turns (a greeting) are recorded as an
  `unsolicited` event, not given to a turn, unless a script's `wait_for` listens for them (`listen`): then
  they are a turn of their own, read the same way but ended by quiet too (`ws.UNASKED_QUIET_S`).
- `response.poll`: after the send request, the poll URL (which may use `{{response.X}}`, the send's JSON
  answer) is requested at once and then every `interval` until `poll.text` finds text or `poll.done` holds,
  within `poll.timeout` (default `turn_timeout`). A 4xx poll is "not yet" (401/403/405, and 501 without JSON:
  InfraError); 5xx fails.
  `raw` is the send answer then every poll answer; `response`, `status`, tool calls, `done` and handoff
  come from the final poll answer.
- `response.listen`: tamesu serves `listen.path` (at `{{listen.url}}`) and the agent posts its reply there;
  each post is answered `{"ok": true}`. The turn is the posts after the send, until `listen.done` holds on
  one, or `listen.idle` passes with nothing new after at least one. The text joins the posts' texts with
  newlines; `raw` is the posts, `response` the last; `status` is the send's; `completed_at_ms` is the
  arrival of the last post (the idle wait is not latency) and `first_token_at_ms` that of the first with text.

Whatever the mode: tool calls are what `response.tool_calls` finds in each document of the turn (items
`{name, args|arguments|input, result|output}` or OpenAI's `{function: {name, arguments}}`; arguments as a
JSON string are parsed); `ended` is set when `response.done` holds on any of them, or on a handoff.

Failures: a request that never reached the agent (refused, DNS, connect timeout) is retried `connect.attempts`
times `connect.backoff` apart (a `connect_retry` event per failed attempt that is retried), then InfraError.
A turn that went out on a kept-alive connection the agent had just closed is sent again once on a new one
(a `resent` event; `tamesu.net.aio`).
A 5xx answer raises TurnError; a 4xx answer is a normal turn whose `status` the `status` assertion checks, but
a 429 (too many requests), which is sent again `rate_limit_retries` times after its Retry-After (a
`rate_limited` event each), then an InfraError. A 401, 403, 404, 405 or 501 without JSON is the server refusing
the request (`net.urls.REFUSAL_HINTS`): InfraError naming the url and the status.
A turn over `turn_timeout` raises TurnError. session.open failing, or the websocket handshake, is InfraError.

Events: `transport`, `session_open`, `connect_retry`, `resent`, `rate_limited`, `handoff`, `unsolicited`.
Metric: `rest_requests`, the HTTP requests that reached the agent (session.open, sends, polls) plus websocket sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tamesu.conversation import AgentTurn, FileRef, Session, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.net.direct import Request, finish
from tamesu.net.urls import shown_url
from tamesu.plugins import register
from tamesu.suite.templates import Context, references
from tamesu.targets.base import Target
from tamesu.targets.rest._after_send import listen_turn, listened, poll_turn
from tamesu.targets.rest._opening import connect_websocket, open_conversation, start_listener
from tamesu.targets.rest.answer import TurnReader, timed_out
from tamesu.targets.rest.body import Reading, reading_of
from tamesu.targets.rest.files import attachments, file_refusal, form_body
from tamesu.targets.rest.http import Answer, Http, answer_body, read_text
from tamesu.targets.rest.read import StreamText
from tamesu.targets.rest.request import message_with_trace, render_url, rendered_headers, request_body, trace_values
from tamesu.targets.rest.spec import (
    Condition,
    ListenSpec,
    PathEquals,
    PollSpec,
    RequestSpec,
    ResponseSpec,
    RestSessionSpec,
    RestSpec,
)
from tamesu.targets.rest.sse import DONE, is_stream, stream_events
from tamesu.targets.rest.ui_stream import DATA_STREAM_MARK, UiConversation, reads_ui_stream, ui_conversation, ui_reader

if TYPE_CHECKING:
    # imported where used: websockets (6.6 MiB) by `streaming: websocket`, the listener's HTTP server (uvicorn,
    # starlette: 16 MiB) by `listen:`
    from tamesu.targets.rest.listen import Listener
    from tamesu.targets.rest.ws import WsLink

__all__ = ["Condition", "ListenSpec", "PathEquals", "PollSpec", "RequestSpec", "ResponseSpec",
           "RestSessionSpec", "RestSpec", "RestTarget"]

UNSOLICITED_KEPT = 20


@register("targets", "rest")
class RestTarget(Target[RestSpec]):
    kind = "rest"
    metric_names = frozenset({"rest_requests"})
    reads_handoff = answers_http_status = opens_session = True
    Spec = RestSpec
    carries_history = True
    takes_options = None  # the body's `options`

    def __init__(self, spec: RestSpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: RestSpec = spec
        self.session_id = ""
        self._http: Http | None = None
        self._ws: WsLink | None = None
        self._listener: Listener | None = None
        self._requests_before = 0
        self._waiting_for = ""
        self._stream: StreamText | None = None
        """The stream the turn is reading, for what came before a timeout."""
        self._sse_detected = self._ui_stream_detected = False
        self._reader = TurnReader(spec, self._require_session)
        self._played: list[dict[str, object]] = []
        """The conversation so far as `{role, content}` messages, for `{{messages}}` (an agent that keeps none)."""
        self._messages: list[dict[str, object]] = []
        """`_played` and the turn being sent."""
        self._ui: UiConversation | None = None
        """The same conversation as the AI SDK's UI messages, for `{{ui_messages}}` (when a template names it)."""

    # -- open and close -------------------------------------------------------------------------------

    async def _open(self, session: Session) -> None:
        spec = self.spec
        self._played, self._ui = [], ui_conversation(spec, session.context.given("vars"))
        self._http = Http(session=session, connect=spec.connect, tls=spec.tls, pool_timeout=spec.turn_timeout + 1,
                          what=self._what, max_bytes=spec.max_response_bytes,
                          rate_limit_retries=spec.rate_limit_retries)
        if spec.response.listen is not None:
            self._listener = await start_listener(session, spec.response.listen, spec.max_response_bytes, self._what)
        id_needs_captures = spec.session.id is not None and any(
            expr.startswith("session.") for expr, _ in references(spec.session.id))
        if not id_needs_captures:
            self.session_id = self._session_id()
        if spec.session.open is not None:
            await open_conversation(session, self._require_http(), self._context(), spec.session.open, spec,
                                    self._what)
        if id_needs_captures:
            self.session_id = self._session_id()
        url = self._shown_url()
        if spec.streaming == "websocket":
            self._ws, url = await connect_websocket(session, self._context(), spec, self._what)
        session.event("transport", streaming=spec.streaming, read=self._read_mode(), url=url,
                      session_id=self.session_id,
                      listen_url=None if self._listener is None else self._listener.shown(query=True))

    def _session_id(self) -> str:
        template = self.spec.session.id
        if template is None:
            return uuid.uuid4().hex
        return self._context().render_text(template)

    def _read_mode(self) -> str:
        if self.spec.response.poll is not None:
            return "poll"
        if self.spec.response.listen is not None:
            return "listen"
        return "stream" if self.spec.streaming != "none" else "answer"

    def _shown_url(self) -> str:
        """The URL for the transport event; a template that needs a turn's values is shown as written."""
        try:
            return shown_url(render_url(self._context(), self.spec.url), self._require_session().redactor.text,
                             query=True)
        except TemplateError:
            return shown_url(self.spec.url, query=True)

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        listener, self._listener = self._listener, None
        http, self._http = self._http, None
        if ws is not None:
            self._requests_before += ws.sent
            await ws.close()
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.stop()
        if http is not None:
            self._requests_before += http.requests
            with contextlib.suppress(Exception):
                await http.aclose()

    def metrics(self) -> dict[str, float]:
        live = (self._http.requests if self._http else 0) + (self._ws.sent if self._ws else 0)
        return {"rest_requests": float(self._requests_before + live)}

    # -- turns ----------------------------------------------------------------------------------------

    async def send(self, turn: UserTurn) -> AgentTurn:
        http = self._require_http()  # set at open, with the session
        self._waiting_for, self._stream = "", None
        limit = self.spec.turn_timeout
        # a history the test gives (JSONL) stands for everything before this turn; otherwise what was played
        earlier = turn.messages()[:-1] if turn.history else self._played
        self._messages = [*earlier, {"role": "user", "content": (shown := turn.display())}]
        if self._ui is not None:
            self._ui.send(shown, earlier if turn.history else None)
        try:
            async with asyncio.timeout(limit) as scope:
                answered = await self._exchange(turn)
            # an answer of tool calls alone adds no assistant message: an empty one is refused by some models' APIs
            reply: list[dict[str, object]] = [{"role": "assistant", "content": answered.text}] if answered.text else []
            self._played = [*self._messages, *reply]
            if self._ui is not None:
                self._ui.answered(answered.text)
            return answered
        except TimeoutError:
            if not scope.expired():
                raise
            if http.unreachable is not None:
                raise InfraError(f"{self._what}: cannot reach the agent within the turn timeout ({limit:g}s): "
                                 f"{http.unreachable}") from None
            raise timed_out(limit, self._waiting_for, self._stream) from None

    async def _exchange(self, turn: UserTurn) -> AgentTurn:
        if self.spec.streaming == "websocket":
            return await self._websocket_turn(turn)
        request = await self._turn_request(turn)
        if self.spec.streaming == "sse":
            return await self._sse_turn(request)
        if self.spec.response.poll is not None:
            return await poll_turn(self._require_http(), self._reader, request, self.spec, self.spec.response.poll,
                                   context=lambda answered: self._turn_context(turn, response=answered),
                                   waiting=self._waiting, mask=self._mask)
        if self._listener is not None and self.spec.response.listen is not None:
            self._note_unsolicited(self._listener.drain())
            return await listen_turn(self._require_http(), self._reader, request, self._listener,
                                     self.spec.response.listen, waiting=self._waiting)
        if "streaming" not in self.spec.model_fields_set:
            # not said: the answer's content type says whether it streams (read as one answer when it does not)
            return await self._sse_turn(request, sniffing=True)
        self._waiting_for = "waiting for the answer"
        answer = await self._require_http().fetch(request)
        return self._reader.answer_turn(answer)

    async def _sse_turn(self, request: Request, *, sniffing: bool = False) -> AgentTurn:
        """`sniffing`: `streaming` was not set, and an event stream is read as one only because the answer
        says it is (`text/event-stream`, newline-delimited JSON), said once as an `sse_detected` event."""
        session = self._require_session()
        http = self._require_http()
        self._waiting_for = "waiting for the answer" if sniffing else "reading the event stream"
        response, sent_at = await http.open_stream(request)
        try:
            content_type = response.headers.get("content-type", "").lower()
            if response.status >= 400 or not is_stream(content_type):
                # The agent answered without streaming (an error, or a plain JSON reply): read it as one.
                self._waiting_for = f"reading the answer: HTTP {response.status} came, not the whole body"
                text, cut = await read_text(response, session, http.max_bytes)
                answer = Answer(response.status, answer_body(response.status, response.headers, text, cut), sent_at,
                                session.now_ms(), data_stream=sniffing and DATA_STREAM_MARK in response.headers)
                return self._reader.answer_turn(answer)
            if sniffing:
                self._waiting_for = "reading the event stream"
                if not self._sse_detected:
                    self._sse_detected = True
                    session.event("sse_detected", note=f"streaming is not set and the agent answered "
                                  f"{content_type.split(';')[0]}: its events were read as with streaming: sse")
            stream = self._stream = self._stream_reader(response.headers)
            completed_at: float | None = None
            reading = reading_of(response.headers, http.max_bytes)
            async with contextlib.aclosing(stream_events(response, content_type, session.now_ms, reading)) as events:
                async for event, at in events:
                    if event == DONE or stream.add(event, at):
                        completed_at = at
                        break
            if reading.cut:
                # the events before the limit are the turn; the one cut in half is dropped
                reading.record(session, "the event stream")
            if completed_at is None:
                completed_at = session.now_ms()
        finally:
            finish(response)
        return self._reader.stream_turn(stream, response.status, sent_at, completed_at)

    def _stream_reader(self, headers: Mapping[str, str]) -> StreamText:
        if not reads_ui_stream(headers, self.spec.response):
            return StreamText(self.spec.response)
        if not self._ui_stream_detected:
            self._ui_stream_detected = True
            self._require_session().event("ui_message_stream", note="the agent answered the AI SDK's UI message "
                                          "stream: its text-delta events are the reply, tool-input-available and "
                                          "tool-output-available its tool calls")
        return ui_reader(self._ui, self.spec.response)

    async def _websocket_turn(self, turn: UserTurn) -> AgentTurn:
        from tamesu.targets.rest.ws import read_answer  # loaded with the link, at open

        session = self._require_session()
        ws = self._require_ws()
        self._note_unsolicited(ws.drain())
        ctx = self._turn_context(turn)
        body, has_body = request_body(ctx, turn, self.spec.request, self.session_id)
        body = message_with_trace(body, ctx, self.spec, session.trace)
        payload = "" if not has_body else body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        self._waiting_for = "waiting for the final websocket message"
        sent_at = session.now_ms()
        await ws.send(payload)
        stream = self._stream = StreamText(self.spec.response)
        last_at = await read_answer(ws, stream, Reading(limit=self._require_http().max_bytes), session)
        return self._reader.stream_turn(stream, None, sent_at, sent_at if last_at is None else last_at)

    async def listen(self, timeout: float) -> AgentTurn | None:
        """On a websocket, what the agent sends unasked (a greeting, more after a turn), read as a turn's answer is
        (tamesu.targets.rest.ws.read_unasked), or posts to `{{listen.url}}` no turn asked for; other modes hear
        the agent only in answer to a turn."""
        if self._listener is not None and (listen := self.spec.response.listen) is not None:
            posted = await self._listener.unasked(listen, timeout, self.spec.turn_timeout)
            turn = None if posted is None else listened(self._reader, listen, self._reader.turn(status=None, **posted))
        elif self._ws is None:
            return None
        else:
            from tamesu.targets.rest.ws import read_unasked

            self._stream, self._waiting_for = StreamText(self.spec.response), "reading what the agent sent unasked"
            try:
                heard = await read_unasked(self._ws, self._stream, Reading(limit=self._require_http().max_bytes),
                                           self._require_session(), wait_s=timeout,
                                           turn_timeout=self.spec.turn_timeout)
            except TimeoutError:
                raise timed_out(self.spec.turn_timeout, self._waiting_for, self._stream) from None
            turn = None if heard is None else self._reader.stream_turn(self._stream, None, *heard)
        if turn is not None and turn.text:  # said in the conversation: `{{messages}}` carries it
            self._played = [*self._played, {"role": "assistant", "content": turn.text}]
        return turn

    def _waiting(self, what: str) -> None:
        self._waiting_for = what

    def _note_unsolicited(self, messages: Sequence[object]) -> None:
        if messages:
            self._require_session().event("unsolicited", count=len(messages),
                                          messages=self._require_session().redactor.data(
                                              messages[:UNSOLICITED_KEPT]))

    # -- rendering ------------------------------------------------------------------------------------

    def _context(self, **extra: object) -> Context:
        """The session's templates plus this target's namespaces: `session`, `listen`, and `extra`."""
        session = self._require_session()
        own: dict[str, object] = {"session": {"": self.session_id, **session.values} if self.session_id
                               else dict(session.values)}
        if self._listener is not None:
            own["listen"] = {"url": self._listener.url}
        return session.context.child(**own, **extra)

    def _turn_context(self, turn: UserTurn, **extra: object) -> Context:
        """`{{message}}`, `{{attachments}}`, `{{trace.traceparent}}` and `{{trace.id}}` (the turn's W3C trace),
        `{{messages}}` (the conversation so far, or the history a JSONL test gives, and this turn) and
        `{{options.X}}` of a JSONL test."""
        extra.setdefault("trace", trace_values(self._require_session().trace))
        ui = {"ui_messages": self._ui.messages} if self._ui is not None else {}  # no such name when none is kept
        return self._context(message=turn.text, messages=self._messages, options=turn.options,
                             attachments=attachments(turn, self._what), **extra, **ui)

    async def _turn_request(self, turn: UserTurn) -> Request:
        ctx = self._turn_context(turn)
        headers = rendered_headers(ctx, self.spec.headers)
        if self.spec.streaming == "sse" and not any(k.lower() == "accept" for k in headers):
            headers["Accept"] = "text/event-stream"
        body, has_body = request_body(ctx, turn, self.spec.request, self.session_id, self.spec.method)
        url = render_url(ctx, self.spec.url)
        multipart = self.spec.request.multipart
        if multipart is not None:
            sent, content = await form_body(headers, body if has_body else None, turn, multipart.files, self._what)
            return self._require_http().request(self.spec.method, url, sent, content)
        return self._require_http().build(self.spec.method, url, headers, body, has_body=has_body)

    @classmethod
    def file_refusal(cls, spec: object, file: FileRef, models: Mapping[str, object]) -> str | None:
        if not isinstance(spec, RestSpec):
            raise TypeError(f"a rest target's spec, not {type(spec).__name__}")
        return file_refusal(spec.request, file, "POST" if spec.streaming == "websocket" else spec.method)

    def _mask(self, text: str) -> str:
        return self._require_session().redactor.text(text)

    # -- state ----------------------------------------------------------------------------------------

    def _require_http(self) -> Http:
        if self._http is None:
            raise RuntimeError(f"{self._what} is not open")
        return self._http

    def _require_ws(self) -> WsLink:
        if self._ws is None:
            raise RuntimeError(f"{self._what} has no websocket open")
        return self._ws
