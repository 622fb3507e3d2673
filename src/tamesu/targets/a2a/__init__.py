"""The `a2a` target: an agent that speaks the Agent2Agent protocol, 0.3 or 1.0, on JSON-RPC, HTTP+JSON or gRPC.

Keys: `_spec.A2ASpec` (templates allowed in `url`, `headers`, `metadata`); how `transport` is chosen is in
`_transport`; a JSONL test's `options.metadata` adds to the messages' metadata and its `options.skip` goes under
`skip`.

Opening a session:
1. The card, looked for and read as `_discover` says (found: a `card` event; none: `card_missing`, and the card
   is assumed to offer what the target asks for). `skill` is then checked: not on the card, or no card to
   check it on, fails the session naming the skills the card has.
2. The transport (`_transport`), and the way turns are followed: `stream` when the card allows streaming (else
   a `no_streaming` event and message/send), `push` when the card allows push notifications (else `no_push` and
   polling). Recorded as a `transport` event: `binding`, `protocol_version` (major.minor), `url`, `mode`
   (send, stream or push), `reason`, `push_url`, `skill` (the id of the skill asked for, which
   `tamesu coverage` counts as exercised).

A turn is one message with a fresh messageId (`_turn.user_message`), carrying the session's contextId once the
agent gave one, and the taskId of a task waiting in input-required or auth-required.
- send: message/send; a task left submitted or working is read with tasks/get every `poll_interval` (500 ms)
  until it settles.
- push: message/send asking to return at once, with the listener's URL and a token; the turn waits for
  notifications about its task (`_push`), and reads the task with tasks/get every ten poll intervals in case one
  was lost (`push_missed` when one was); a settling notification without the whole task is followed by tasks/get.
- stream: message/stream until a message, or a status in which the task settles. A stream that ends or breaks
  before that is picked up with tasks/resubscribe (a `resubscribed` event each time, up to `connect.attempts`
  per turn); a task that finished meanwhile, or an agent that will not resubscribe, is followed with tasks/get.
A task settles in every state but submitted and working. Each state change of a task is a `task_<state>`
event (`task_input_required`, ...). After the turn: input-required or auth-required continue the task on the
next turn; completed starts a new task in the same context; failed, canceled and rejected end the
conversation (`AgentTurn.ended`). Closing the session cancels a task still waiting for input (tasks/cancel,
at most CANCEL_TIMEOUT; a refusal is a `cancel_failed` event).

What a turn records: `raw` is every answer in order (the send's result, each stream event, each push, each
tasks/get that changed something) and `response` the task as it finally stands (a plain message result is
the message), all in the one shape of `_normalize` whatever the version and binding: so `json_path` reads
`$.status.state`, `$.artifacts[*].name`, `$.artifacts[*].parts[?(@.kind == 'data')].data` on the response first,
then on the events. Its text is read as `_read` says. `first_token_at_ms` is the first streamed event with text.

Failures: a call that never reaches the agent is retried (`connect_retry` events), then InfraError; an HTTP call
that went out on a kept-alive connection the agent had just closed is sent again once (a `resent` event,
`tamesu.net.aio`). An error the agent answers (JSON-RPC error, HTTP+JSON error status, gRPC status) fails the turn
with TurnError naming its JSON-RPC code (the same A2A error's code on every binding) and message. A turn over
`turn_timeout` fails with TurnError, without waiting for the agent.

Metrics: `a2a_tasks` (tasks the session saw), `a2a_requests` (calls that reached the agent: sends, streams,
polls, resubscribes, the extended card, the cancel made at close, since the engine reads the metrics once the
target is closed; not the public card), `a2a_skills` (on the card, the extended one when read; absent without a
card), `a2a_pushes` (with push), `a2a_resubscribes` (with stream).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

from a2a.client import Client
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)

from tamesu.conversation import AgentTurn, FileRef, Session, TurnError, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.plugins import register
from tamesu.targets.a2a import _normalize as shape
from tamesu.targets.a2a._card import security_schemes, sends_credentials, summary
from tamesu.targets.a2a._discover import assumed_card, checked_skill, extended_card, find_card, note_grpc_extended
from tamesu.targets.a2a._errors import SDK_ERRORS, agent_error, broken_off, card_named, failure
from tamesu.targets.a2a._push import PushListener
from tamesu.targets.a2a._read import TurnReader
from tamesu.targets.a2a._spec import A2ASpec, PushSpec, check_rendered_url
from tamesu.targets.a2a._transport import Choice, NoSpokenInterface, choose
from tamesu.targets.a2a._turn import Progress, followed_task, turn_metadata, user_message
from tamesu.targets.a2a._wire import Wire
from tamesu.targets.base import Target
from tamesu.types import JSONObject, JSONValue, split_addr

__all__ = ["A2ASpec", "A2ATarget", "PushSpec"]

PUSH_POLL_EVERY = 10
"""With push, a tasks/get every this many poll intervals covers a lost notification."""
CANCEL_TIMEOUT = 10.0
"""Closing waits this long at most for the agent to cancel a task waiting for input."""
_RUNNING = ("submitted", "working")
"""States of a task the agent is still busy with: cancelled when the turn times out."""

_CANCEL_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, InfraError, *SDK_ERRORS)


@register("targets", "a2a")
class A2ATarget(Target[A2ASpec]):
    kind = "a2a"
    metric_names = frozenset({"a2a_tasks", "a2a_requests", "a2a_skills", "a2a_pushes", "a2a_resubscribes"})
    reports_tool_calls = False
    takes_options = frozenset({"metadata", "skip"})  # the message's metadata (`_turn.turn_metadata`)
    """Only messages and artifacts travel over A2A."""
    Spec = A2ASpec
    carries_history = True
    poll_interval = 0.5
    """Seconds between tasks/get while a task works (the A2A target page's 500 ms)."""

    @classmethod
    def file_refusal(cls, spec: object, file: FileRef, models: Mapping[str, object]) -> str | None:
        return None  # a file part: its bytes inline, or its URI

    def __init__(self, spec: A2ASpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: A2ASpec = spec
        self._wire: Wire | None = None
        self._client: Client | None = None
        self._listener: PushListener | None = None
        self._reader = TurnReader()
        self._url = ""
        self._choice: Choice | None = None
        self._card: AgentCard | None = None
        self._metadata: dict[str, object] = {}
        self._streaming = False
        self._pushing = False
        self.context_id: str | None = None
        self.task_id: str | None = None
        """The task the next turn continues (it waits for input), or None for a new task."""
        self._ended_status: JSONValue = None
        self._states: dict[str, str] = {}
        """Task id -> the last state seen: every task the session saw, for a2a_tasks and task_<state>."""
        self._requests_before = 0
        self._pushes = 0
        self._resubscribes = 0
        self._waiting_for = ""
        self._progress: Progress | None = None

    # -- open -----------------------------------------------------------------------------------------

    async def _open(self, session: Session) -> None:
        spec = self.spec
        try:
            self._url = session.context.render_url(spec.url)
            headers = {key: session.context.render_text(value) for key, value in spec.headers.items()}
            self._metadata = session.context.render_value(spec.metadata)
        except TemplateError as exc:
            raise InfraError(f"{self._what}: {exc}") from exc
        check_rendered_url(self._url, spec.url, self._what, session.redactor.text, tls=spec.tls is not None)
        self._wire = Wire(session=session, connect=spec.connect, tls=spec.tls, turn_timeout=spec.turn_timeout,
                          headers=headers, what=self._what, max_response_bytes=spec.max_response_bytes,
                          rate_limit_retries=spec.rate_limit_retries)
        search = await find_card(self._wire, self._url, spec.turn_timeout)
        card = search.card
        if card is None:
            session.event("card_missing", tried=[session.redactor.text(t) for t in search.tried])
        else:
            session.event("card", **summary(card), found_at=session.redactor.text(search.found_at or ""))
            note_grpc_extended(session, search)
        credentials = sends_credentials(headers, card)
        if card is not None and security_schemes(card) and not credentials:
            session.event("auth_missing", schemes=security_schemes(card))
        try:
            choice = choose(card, self._url, spec.transport)
        except NoSpokenInterface as exc:
            raise InfraError(f"{self._what}: {exc}") from None
        self._choice = choice
        if named := card_named(choice, self._url, session.redactor.text):
            self._wire.card_named[choice.url] = named
        unread = None
        if card is not None and card.capabilities.extended_agent_card and credentials and not search.authenticated:
            card, unread = await extended_card(self._wire, session, card, choice, spec.turn_timeout)
        self._card = card
        skill = checked_skill(self.spec.skill, card, search, self._what,
                              self._require_session().redactor.text("; ".join(search.tried) or self._url),
                              session.redactor.text(unread) if unread else None,
                              unasked=card is not None and card.capabilities.extended_agent_card and not credentials)
        self._streaming = spec.stream and (card is None or card.capabilities.streaming)
        if spec.stream and not self._streaming:
            session.event("no_streaming", reason="the agent card says the agent does not stream")
        push = spec.push_spec
        self._pushing = push is not None and (card is None or card.capabilities.push_notifications)
        if push is not None and not self._pushing:
            session.event("no_push", reason="the agent card says the agent does not send push notifications")
        if self._pushing and push is not None:
            await self._start_listener(push)
        card_or_assumed = card or assumed_card(spec.stream, spec.push_spec is not None)
        self._client = self._wire.client(card_or_assumed, choice, streaming=self._streaming)
        session.event("transport", binding=choice.key, protocol_version=choice.shown_version,
                      url=session.redactor.text(choice.url), mode=self._mode, reason=choice.reason,
                      push_url=None if self._listener is None else self._listener.url, skill=skill)

    @property
    def _mode(self) -> str:
        return "stream" if self._streaming else "push" if self._pushing else "send"

    async def _start_listener(self, push: PushSpec) -> None:
        session = self._require_session()
        host, port = split_addr(push.addr) if push.addr else ("127.0.0.1", 0)
        try:
            public = session.context.render_url(push.url) if push.url else None
            self._listener = PushListener(session, host=host, port=port, public_url=public)
            await self._listener.start()
        except TemplateError as exc:
            raise InfraError(f"{self._what}: push.url: {exc}") from exc
        except Exception as exc:
            raise InfraError(f"{self._what}: cannot listen for push notifications on {host}:{port}: "
                             f"{exc}") from exc

    # -- close ----------------------------------------------------------------------------------------

    async def close(self) -> None:
        if self.task_id is not None and self._client is not None and self._wire is not None:
            await self._cancel_waiting(self.task_id)
        client, self._client = self._client, None
        wire, self._wire = self._wire, None
        listener, self._listener = self._listener, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if wire is not None:
            self._requests_before += wire.requests
            with contextlib.suppress(Exception):
                await wire.aclose()
        if listener is not None:
            self._pushes += listener.received
            with contextlib.suppress(Exception):
                await listener.stop()

    async def _cancel_waiting(self, task_id: str) -> None:
        session = self._require_session()
        wire, client, choice = self._require_wire(), self._require_client(), self._require_choice()
        self.task_id = None
        try:
            async with asyncio.timeout(min(self.spec.turn_timeout, CANCEL_TIMEOUT)):
                task = await wire.call(choice.url, lambda: client.cancel_task(
                    CancelTaskRequest(id=task_id), context=wire.context(choice)))
            self._observe(shape.task(task))
        except _CANCEL_ERRORS as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else agent_error(exc).describe()
            session.event("cancel_failed", task_id=task_id, reason=reason)

    def metrics(self) -> dict[str, float]:
        requests = self._requests_before + (self._wire.requests if self._wire else 0)
        found: dict[str, float] = {"a2a_tasks": float(len(self._states)), "a2a_requests": float(requests)}
        if self._card is not None:
            found["a2a_skills"] = float(len(self._card.skills))
        if self._pushing:
            found["a2a_pushes"] = float(self._pushes + (self._listener.received if self._listener else 0))
        if self._streaming:
            found["a2a_resubscribes"] = float(self._resubscribes)
        return found

    # -- turns ----------------------------------------------------------------------------------------

    async def send(self, turn: UserTurn) -> AgentTurn:
        wire = self._require_wire()
        self._waiting_for = "waiting for the answer"
        self._progress = None
        limit = self.spec.turn_timeout
        try:
            async with asyncio.timeout(limit) as scope:
                return await self._exchange(turn)
        except TimeoutError:
            if not scope.expired():
                raise
            if wire.unreachable is not None:
                raise InfraError(f"{self._what}: cannot reach the agent within the turn timeout ({limit:g}s): "
                                 f"{wire.unreachable}") from None
            progress = self._progress
            cancelled = await self._cancel_unsettled(progress)
            raise TurnError(f"turn timed out after {limit:g}s ({self._waiting_for}){cancelled}",
                            raw=None if progress is None else progress.doc, limit_s=limit) from None

    async def _cancel_unsettled(self, progress: Progress | None) -> str:
        """A task still running when the turn timed out is cancelled, not left working on the agent; what the
        agent said to the cancel is recorded (a `task_cancelled_at_timeout` event) and told in the turn."""
        task_id = progress.task_id if progress is not None else None
        state = shape.state_of(progress.doc) if progress is not None and progress.doc is not None else None
        if task_id is None or state not in _RUNNING:
            return ""
        session, wire = self._require_session(), self._require_wire()
        client, choice = self._require_client(), self._require_choice()
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT):
                task = await wire.call(choice.url, lambda: client.cancel_task(
                    CancelTaskRequest(id=task_id), context=wire.context(choice)))
        except _CANCEL_ERRORS as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else agent_error(exc).describe()
            session.event("task_cancelled_at_timeout", task_id=task_id, state=state, cancelled=False, reason=reason)
            return f"; the {state} task {task_id} could not be cancelled: {reason}"
        doc = shape.task(task)
        self._observe(doc)
        session.event("task_cancelled_at_timeout", task_id=task_id, state=state, cancelled=True,
                      now=shape.state_of(doc))
        if self.task_id == task_id:
            self.task_id = None
        return f"; the {state} task {task_id} was cancelled"

    async def _exchange(self, turn: UserTurn) -> AgentTurn:
        session = self._require_session()
        metadata = turn_metadata(self._metadata, turn)
        if session.trace is not None:
            # the message carries the trace too, for agents that hand it on past the HTTP layer
            metadata.setdefault("traceparent", session.trace.traceparent)
        message = user_message(turn, base_dir=session.base_dir, context_id=self.context_id, task_id=self.task_id,
                               metadata=metadata, what=self._what)
        request = SendMessageRequest(message=message)
        stale = self._ended_status if self.task_id and self._mode != "send" else None  # `Progress._stale_status`
        progress = self._progress = Progress(self._observe, stale_status=stale)
        sent_at = session.now_ms()
        try:
            if self._streaming:
                await self._streamed(request, progress)
            elif self._pushing:
                await self._pushed(request, progress)
            else:
                await self._sent(request, progress)
        except SDK_ERRORS as exc:
            error = agent_error(exc)
            if error.too_large_grpc is not None:
                self._require_wire().grpc_refused(error.too_large_grpc)
            raise failure(error, self.spec.rate_limit_retries, self._what, self._require_choice(), self._url,
                          session.redactor.text, session.runs_going()) from None
        return self._agent_turn(progress, message.message_id, sent_at)

    def _agent_turn(self, progress: Progress, message_id: str, sent_at: float) -> AgentTurn:
        session = self._require_session()
        doc = progress.doc
        completed_at = progress.last_at if progress.last_at is not None else session.now_ms()
        state = shape.state_of(doc) if doc is not None else None
        if doc is not None and doc.get("kind") == "task":
            self.context_id = str(doc.get("contextId") or "") or self.context_id
            waiting = state in shape.WAITING
            self.task_id = shape.task_id_of(doc) if waiting else None
            self._ended_status = doc.get("status") if waiting else None
        elif doc is not None:
            self.context_id = str(doc.get("contextId") or "") or self.context_id
        return AgentTurn(
            text=self._reader.text(doc, message_id), response=doc, raw=progress.raw, sent_at_ms=sent_at,
            first_token_at_ms=progress.first_text_at if self._streaming else None, completed_at_ms=completed_at,
            ended=state in shape.ENDED,
        )

    def _observe(self, doc: JSONObject) -> None:
        """Every task the session sees, and a task_<state> event when one reports a new state."""
        task_id = shape.task_id_of(doc)
        state = shape.state_of(doc)
        if task_id is None:
            return
        if state is None:
            self._states.setdefault(task_id, "")
            return
        if self._states.get(task_id) != state:
            self._states[task_id] = state
            self._require_session().event(f"task_{state.replace('-', '_')}", task_id=task_id,
                                          context_id=doc.get("contextId"))

    # -- the three ways to follow a task ---------------------------------------------------------------

    async def _send_once(self, request: SendMessageRequest) -> StreamResponse:
        client = self._require_client()
        choice = self._require_choice()
        wire = self._require_wire()

        async def attempt() -> StreamResponse:
            # Without streaming the SDK yields exactly one result: the task or the message.
            sent = client.send_message(request, context=wire.context(choice))
            async with contextlib.aclosing(sent) as results:  # type: ignore[type-var]  # the SDK says AsyncIterator; it is an async generator, which has aclose
                async for result in results:
                    return result
            raise TurnError("the agent answered the message with nothing")

        return await wire.call(choice.url, attempt)

    async def _get_task(self, task_id: str) -> JSONObject:
        client, wire, choice = self._require_client(), self._require_wire(), self._require_choice()
        task = await wire.call(choice.url, lambda: client.get_task(GetTaskRequest(id=task_id),
                                                                    context=wire.context(choice)))
        return shape.task(task)

    async def _sent(self, request: SendMessageRequest, progress: Progress) -> None:
        session = self._require_session()
        result = await self._send_once(request)
        progress.add(shape.stream_event(result), session.now_ms())
        while not progress.settled:
            task_id = followed_task(progress)
            self._waiting_for = f"task {task_id} is {shape.state_of(progress.doc or {})}: polling with tasks/get"
            await asyncio.sleep(self.poll_interval)
            progress.add_polled(await self._get_task(task_id), session.now_ms())

    async def _pushed(self, request: SendMessageRequest, progress: Progress) -> None:
        session = self._require_session()
        listener = self._require_listener()
        request.configuration.CopyFrom(SendMessageConfiguration(
            return_immediately=True,
            task_push_notification_config=TaskPushNotificationConfig(url=listener.url, token=listener.token)))
        result = await self._send_once(request)
        progress.add(shape.stream_event(result), session.now_ms())
        loop = asyncio.get_running_loop()
        every = PUSH_POLL_EVERY * self.poll_interval
        next_poll = loop.time() + every
        while not progress.settled:
            task_id = followed_task(progress)
            self._waiting_for = (f"task {task_id} is {shape.state_of(progress.doc or {})}: waiting for a push "
                                 f"notification at {listener.url}")
            arrived = await listener.next(max(0.0, next_poll - loop.time()))
            if arrived is None:
                before = shape.state_of(progress.doc or {})
                progress.add_polled(await self._get_task(task_id), session.now_ms())
                listener.polled(task_id, before, shape.state_of(progress.doc or {}), every)
                next_poll = loop.time() + every
                continue
            doc, at = arrived
            if shape.task_id_of(doc) != task_id:
                continue
            progress.add(doc, at)
            if progress.settled and doc.get("kind") != "task":
                # The notification said how it ended; the task as it stands holds the rest.
                progress.add_polled(await self._get_task(task_id), session.now_ms())

    async def _streamed(self, request: SendMessageRequest, progress: Progress) -> None:
        session = self._require_session()
        client, wire, choice = self._require_client(), self._require_wire(), self._require_choice()
        context = wire.context(choice)
        events = wire.stream(choice.url, lambda: client.send_message(request, context=context))
        self._waiting_for = "reading the stream"
        attempts = 0
        while True:
            try:
                if await self._read_stream(events, progress):
                    return
                why = "the stream ended before the task settled"
            except SDK_ERRORS as exc:
                if attempts and not broken_off(exc):
                    # The agent would not resume the stream (the task may have finished meanwhile): read it.
                    await self._read_after_refusal(progress, exc)
                    return
                if not broken_off(exc):
                    raise
                why = f"the stream broke: {agent_error(exc).message}"
            task_id = progress.task_id
            if task_id is None:
                raise TurnError(f"{why}, before the agent sent a task or a message")
            if attempts >= self.spec.connect.attempts:
                progress.add_polled(await self._get_task(task_id), session.now_ms())
                if progress.settled:
                    return
                raise TurnError(f"{why}; after {attempts} resubscriptions task {task_id} is still "
                                f"{shape.state_of(progress.doc or {})}", raw=progress.doc)
            attempts += 1
            self._resubscribes += 1
            session.event("resubscribed", task_id=task_id, attempt=attempts, reason=why)
            self._waiting_for = f"reading the stream of task {task_id} again (resubscribed {attempts} times)"
            events = wire.stream(choice.url, lambda task_id=task_id: client.subscribe(  # type: ignore[misc]  # a lambda binding the loop variable
                SubscribeToTaskRequest(id=task_id), context=context))

    async def _read_after_refusal(self, progress: Progress, refusal: BaseException) -> None:
        """The agent would not resume the stream: follow the task with tasks/get as message/send does."""
        session = self._require_session()
        task_id = followed_task(progress)
        why = agent_error(refusal).describe()
        while True:
            progress.add_polled(await self._get_task(task_id), session.now_ms())
            if progress.settled:
                return
            self._waiting_for = f"task {task_id} could not be resubscribed ({why}): polling with tasks/get"
            await asyncio.sleep(self.poll_interval)

    async def _read_stream(self, events: AsyncIterator[StreamResponse], progress: Progress) -> bool:
        """Read until the turn's end (True) or the stream's (False)."""
        session = self._require_session()
        async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]  # an async generator: it has aclose
            async for event in stream:
                doc = shape.stream_event(event)
                progress.add(doc, session.now_ms(), streamed=True)
                if progress.settled:
                    return True
        return False

    # -- state ----------------------------------------------------------------------------------------

    def _require_wire(self) -> Wire:
        if self._wire is None:
            raise RuntimeError(f"{self._what} is not open")
        return self._wire

    def _require_client(self) -> Client:
        if self._client is None:
            raise RuntimeError(f"{self._what} is not open")
        return self._client

    def _require_choice(self) -> Choice:
        if self._choice is None:
            raise RuntimeError(f"{self._what} is not open")
        return self._choice

    def _require_listener(self) -> PushListener:
        if self._listener is None:
            raise RuntimeError(f"{self._what} has no push listener")
        return self._listener
