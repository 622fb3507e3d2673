"""The `grpc` target: an agent that implements tamesu's turn API (proto/tamesu/turn/v1/turn.proto) over gRPC.

Keys: `url` (`grpc://host:port`, or `grpcs://host[:port]` for TLS), `headers` (sent as call metadata, keys
lower-cased; templates such as `{{secrets.TOKEN}}` render once per run), `mode` (`stream`, the default: one
`Converse` bidirectional stream per run, a user turn in, its events out; `unary`: one `SendTurn` call per user
turn), `turn_timeout`, `connect`, `handoff`, `tls` (a grpcs:// url's trust, `net.grpc_channels.grpc_channel`;
`verify: false` through a relay on a private Unix socket that the target closes with its channel).

A turn: the user turn goes out with the run's `session_id` and its number; the agent's events are read until
the one that ends the turn. Text deltas join into the turn's text (`time_to_first_token_ms` is the arrival of
the first delta with text; on `unary` every event arrives with the reply). Tool calls carry their arguments
and results (a later `ToolResult` with the call's id fills the result in), so `tool_called` and
`tool_sequence` see them. `TurnEnd` ends the turn (its `data` is `$.data` for `json_path`); `Handoff` is the
engine's handoff (`to`, `summary`) and `SessionEnd` the agent ending the conversation; a `handoff:` key on
the target is read too (on the turn's text and its document). An agent that closes the stream with OK during
a turn ends the conversation after what it sent; one that closes it before answering a turn fails that turn
(with the stream's status when it is not OK). The turn's `response` document is `{text, tool_calls,
data, handoff, session_end}`; `raw` is every event as JSON (proto field names).

Failures: the agent unreachable at open is retried `connect.attempts` times `connect.backoff` apart (a
`connect_retry` event each), then InfraError (exit 3); UNAVAILABLE during a turn is InfraError too. An
`Error` event, or a gRPC status other than OK, fails the turn with the code and message; a turn over
`turn_timeout` fails as timed out.

Traces: every `UserTurn` carries its turn's W3C `traceparent` in its `traceparent` field (on a stream, whose
metadata is fixed when it opens, that is the only per-turn carrier); unary calls send it as call metadata
too. A `traceparent` in `headers` wins, in both places.

Every turn ends with exactly one end event (docs/grpc.md): what a stream sends after a turn's end, before the
next turn is sent, is that next turn's no more (`events_after_turn_end`), nor are a SendTurn reply's events
past its first end; a SendTurn reply with no end fails its turn.

Events: `transport`, `connect_retry`, `handoff`, `session_end`, `stream_ended`, `unmatched_tool_result`,
`events_after_turn_end`.
Metric: `grpc_events`, the agent events received.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from typing import Any, Literal

import grpc
from pydantic import Field, ValidationInfo, field_validator, model_validator

from tamesu._proto.turn.v1 import turn_pb2, turn_pb2_grpc
from tamesu.conversation import AgentTurn, FileRef, Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.net.grpc_channels import PLAINTEXT_TLS, dial_target, tls_on_plaintext
from tamesu.net.unverified_grpc import UncheckedRelay
from tamesu.net.urls import shown_url, userinfo_hidden
from tamesu.plugins import register
from tamesu.targets.base import Target, TargetSpec
from tamesu.targets.grpc_turn.events import MAX_EVENTS, TurnEvents
from tamesu.targets.grpc_turn.wire import code_failure, dial, metadata, status_failure, too_large, user_turn
from tamesu.targets.rest.read import handoff as handoff_by_spec

_HUNG_UP = "the agent closed the conversation's stream without answering this turn"


class GrpcSpec(TargetSpec):
    url: str
    """grpc://host:port (grpcs:// for TLS) of an agent implementing tamesu.turn.v1.TurnService."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Call metadata."""
    mode: Literal["stream", "unary"] = "stream"
    """stream: the Converse stream, one per run; unary: one SendTurn call per user turn."""

    # field validators, not one on the whole spec: that one runs only once every field is valid, so a wrong
    # `mode` hid the `tls` problems of the same target

    @model_validator(mode="before")
    @classmethod
    def _plaintext(cls, data: object) -> object:
        return tls_on_plaintext(data)

    @field_validator("url")
    @classmethod
    def _grpc_url(cls, value: str, info: ValidationInfo) -> str:
        if "{{" not in value:
            dial_target(value)
        elif not value.startswith(("{{", "grpc://", "grpcs://")):
            raise ValueError("url must start with grpc:// or grpcs://")
        if info.data.get("tls") is not None and value.startswith("grpc://"):
            raise ValueError(PLAINTEXT_TLS)
        return value


@register("targets", "grpc")
class GrpcTarget(Target[GrpcSpec]):
    kind = "grpc"
    metric_names = frozenset({"grpc_events"})
    reads_handoff = signals_handoff = True
    Spec = GrpcSpec
    carries_history = True

    @classmethod
    def file_refusal(cls, spec: object, file: FileRef, models: Mapping[str, object]) -> str | None:
        return None  # the turn API's File: its bytes, or its URI

    def __init__(self, spec: GrpcSpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: GrpcSpec = spec
        self.session_id = ""
        self._channel: grpc.aio.Channel | None = None
        self._relay: UncheckedRelay | None = None
        """`tls.verify: false`'s way to the agent (`net.unverified_grpc`), closed after the channel."""
        self._stub: turn_pb2_grpc.TurnServiceStub | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._metadata: tuple[tuple[str, str], ...] = ()
        self._turns = 0
        self._events = 0
        self._agent_closed = False
        self._ahead: asyncio.Future[object] | None = None
        """A stream's read begun when a turn ended: what the agent sends before the next turn is sent is found
        there, and said, not credited to that turn."""

    async def _open(self, session: Session) -> None:
        context = session.context
        url = context.render_url(self.spec.url)
        try:
            dial_target(url)
        except ValueError as exc:
            raise InfraError(f"{self._what}: {userinfo_hidden(session.redactor.text(str(exc)))}") from None
        # named as every target names its url: never a user:password@ written in it, declared a secret or not
        shown = shown_url(url, session.redactor.text)
        if self.spec.tls is not None and url.startswith("grpc://"):  # a template's url: said once it is known
            raise InfraError(f"{self._what}: url {shown!r} (from {userinfo_hidden(self.spec.url)!r}): "
                             f"{PLAINTEXT_TLS}")
        self._metadata = metadata({name: context.render_text(value) for name, value in self.spec.headers.items()})
        self.session_id = uuid.uuid4().hex
        self._channel, self._relay = await dial(url, self.spec.connect, session, self._what, tls_spec=self.spec.tls,
                                                max_receive=self.spec.max_response_bytes)
        self._stub = turn_pb2_grpc.TurnServiceStub(self._channel)  # type: ignore[no-untyped-call]  # generated stub, untyped
        if self.spec.mode == "stream":
            self._call = self._stub.Converse(metadata=self._metadata)
        session.event("transport", url=shown, mode=self.spec.mode, session_id=self.session_id,
                      service="tamesu.turn.v1.TurnService")

    async def close(self) -> None:
        call, self._call = self._call, None
        channel, self._channel = self._channel, None
        self._stub = None
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if ahead.done() and not ahead.cancelled():
                ahead.exception()  # the stream's end, taken: never "exception was never retrieved"
            ahead.cancel()
        if call is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(call.done_writing(), 2.0)
            call.cancel()
        if channel is not None:
            with contextlib.suppress(Exception):
                await channel.close()
        relay, self._relay = self._relay, None
        if relay is not None:
            await relay.close()

    def metrics(self) -> dict[str, float]:
        return {"grpc_events": float(self._events)}

    async def send(self, turn: UserTurn) -> AgentTurn:
        session = self._require_session()
        if self._stub is None:
            raise RuntimeError(f"{self._what} is not open")
        self._turns += 1
        index = self._turns
        request = user_turn(turn, session_id=self.session_id, index=index, base_dir=session.base_dir, what=self._what)
        traceparent = self._traceparent(session)
        if traceparent:
            request.traceparent = traceparent
        events = TurnEvents()
        limit = self.spec.turn_timeout
        sent_at = session.now_ms()
        try:
            async with asyncio.timeout(limit) as scope:
                if self._call is not None:
                    await self._stream_turn(self._call, request, events, session)
                else:
                    await self._unary_turn(self._stub, request, events, session, limit)
        except grpc.aio.AioRpcError as exc:
            sized = too_large(exc, self.spec.max_response_bytes, request.ByteSize())
            if sized is not None and sized[0] == "request":
                raise TurnError(f"the agent refused the user turn: its {sized[1]:,} bytes are larger than the agent "
                                f"takes ({sized[2]:,} bytes; its grpc.max_receive_message_length) (gRPC: "
                                f"{exc.code().name}: {exc.details()})", raw={"code": exc.code().name,
                                "details": exc.details()}, status=exc.code().value[0]) from None
            if sized is not None:
                raise self._refused(session, f"a message of the answer was larger than max_response_bytes "
                                             f"({self.spec.max_response_bytes:,}), then refused ({exc.details()})",
                                    events) from None
            raise status_failure(exc, self._what, index, limit, method="SendTurn" if self._call is None
                                 else "Converse", deadline_passed=session.now_ms() - sent_at >= limit * 1000 - 50) \
                from None
        except TimeoutError:
            if not scope.expired():
                raise
            came = len(events.raw)
            detail = ("no reply" if self._call is None
                      else f"{came} event{'' if came == 1 else 's'} received, none ended the turn")
            raise TurnError(f"turn timed out after {limit:g}s ({detail})", raw=events.raw, limit_s=limit,
                            events=True) from None
        finally:
            self._events += len(events.raw)
        if events.error is not None:
            raise TurnError(f"the agent reported an error: {events.error['code'] or 'error'}: "
                            f"{events.error['message']}", raw=events.raw, events=True)
        return self._agent_turn(events, sent_at, session)

    async def _stream_turn(self, call: grpc.aio.StreamStreamCall, request: turn_pb2.UserTurn, events: TurnEvents,
                           session: Session) -> None:
        await self._after_the_end(session, request.turn - 1)
        if self._agent_closed or call.done():
            await self._stream_gone(call, request.turn)
        try:
            await call.write(request)
        except asyncio.InvalidStateError:  # it ended just now
            await self._stream_gone(call, request.turn)
        except grpc.aio.AioRpcError as exc:
            # gRPC's core refuses a message on a call the agent has just ended, as INTERNAL, and that replaces
            # the status the agent gave; on the first turn the agent most likely refused the call itself (a
            # wrong token), so a second call without a message asks it why
            if exc.code() != grpc.StatusCode.INTERNAL:
                raise
            if request.turn == 1:
                found = await self._ask_why_refused(session, exc)
                if found is not None:
                    raise code_failure(*found, self._what, request.turn, self.spec.turn_timeout,
                                       method="Converse") from None
                raise
            raise TurnError(f"{_HUNG_UP} (gRPC: {exc.code().name}: {exc.details()})",
                            raw={"code": exc.code().name, "details": exc.details()}) from None
        while True:
            event = await self._read(call)
            if event is grpc.aio.EOF:
                # read() raises for a status other than OK, so this is the agent hanging up cleanly
                self._agent_closed = True
                if not events.raw:
                    raise TurnError(_HUNG_UP)
                session.event("stream_ended", after_events=len(events.raw))
                return
            events.bytes += event.ByteSize()
            if events.bytes > self.spec.max_response_bytes:
                raise self._refused(session, f"the turn's events were larger than max_response_bytes "
                                             f"({self.spec.max_response_bytes:,}): read {events.bytes:,} bytes in "
                                             f"{len(events.raw) + 1} events, then refused", events)
            if events.add(event, session.now_ms()):
                self._ahead = asyncio.ensure_future(call.read())
                return
            self._too_many(events)

    async def _read(self, call: grpc.aio.StreamStreamCall) -> Any:  # an AgentEvent, or grpc.aio.EOF
        ahead, self._ahead = self._ahead, None
        return await (ahead if ahead is not None else call.read())

    async def _after_the_end(self, session: Session, turn: int) -> None:
        """The events the agent sent after `turn` had ended, before the next turn was sent (the turn API has
        every turn end with exactly one end event): taken off the stream and said (`events_after_turn_end`),
        never credited to the next turn. The end of the stream or its status is left for the next read."""
        stray: list[dict[str, object]] = []
        await asyncio.sleep(0)  # what has come is handed over
        while self._ahead is not None and self._ahead.done() and len(stray) < MAX_EVENTS:
            if self._ahead.cancelled() or self._ahead.exception() is not None or \
                    self._ahead.result() is grpc.aio.EOF:
                break
            event = self._ahead.result()
            assert isinstance(event, turn_pb2.AgentEvent)
            stray.append(TurnEvents.plain(event))
            self._ahead = asyncio.ensure_future(self._require_call().read())
            # the agent is past its end: what it sent with the stray event is taken with it, a moment each
            await asyncio.wait({self._ahead}, timeout=0.05)
        if stray:
            self._events += len(stray)
            session.event("events_after_turn_end", turn=turn, count=len(stray), events=stray[:20])

    def _require_call(self) -> grpc.aio.StreamStreamCall:
        assert self._call is not None
        return self._call

    def _refused(self, session: Session, note: str, events: TurnEvents) -> TurnError:
        """A turn past max_response_bytes: said as a `response_truncated` event and as the turn's failure."""
        session.event("response_truncated", limit=self.spec.max_response_bytes, sizes={"events": events.bytes},
                      read=events.bytes, complete=False, note=note)
        return TurnError(f"{note} (raise the target's max_response_bytes to read it)", raw=events.raw[-20:])

    async def _ask_why_refused(self, session: Session,
                               refused: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str] | None:
        """The status a new call that sends nothing ends with, when it is neither OK nor INTERNAL; None when
        it says nothing more within 2 s. Said in the events either way."""
        assert self._stub is not None
        probe = self._stub.Converse(metadata=self._metadata)
        found: tuple[grpc.StatusCode, str] | None = None
        try:
            async with asyncio.timeout(2):
                await probe.done_writing()
                code = await probe.code()
                if code not in (grpc.StatusCode.OK, grpc.StatusCode.INTERNAL):
                    found = code, await probe.details() or ""
        except (TimeoutError, grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass
        finally:
            probe.cancel()
        session.event("grpc_first_message_refused", details=refused.details(),
                      second_call=found[0].name if found else None)
        return found

    async def _stream_gone(self, call: grpc.aio.StreamStreamCall, index: int) -> None:
        """The stream ended between turns: with a status, that status fails the turn; with OK, the agent hung
        up without saying so."""
        code = await call.code()
        if code != grpc.StatusCode.OK:
            raise code_failure(code, await call.details() or "", self._what, index, self.spec.turn_timeout,
                               method="Converse")
        raise TurnError(_HUNG_UP)

    def _traceparent(self, session: Session) -> str | None:
        """The turn's `traceparent`, or the suite's own when its headers set one (it wins, as on rest)."""
        own = next((value for key, value in self._metadata if key == "traceparent"), None)
        if own is not None:
            return own
        return session.trace.traceparent if session.trace is not None else None

    def _turn_metadata(self, session: Session) -> tuple[tuple[str, str], ...]:
        """A unary call's metadata with the turn's `traceparent` (unless the suite's headers set one). A
        stream's metadata is fixed when it opens, before any turn: there the `UserTurn.traceparent` field
        carries it."""
        if session.trace is None or any(key == "traceparent" for key, _ in self._metadata):
            return self._metadata
        return (*self._metadata, ("traceparent", session.trace.traceparent))

    async def _unary_turn(self, stub: turn_pb2_grpc.TurnServiceStub, request: turn_pb2.UserTurn,
                          events: TurnEvents, session: Session, limit: float) -> None:
        reply = await stub.SendTurn(request, metadata=self._turn_metadata(session), timeout=limit)
        arrived = session.now_ms()
        for at, event in enumerate(reply.events):
            if events.add(event, arrived):
                after = reply.events[at + 1:]
                if after:  # a second end, or anything past the first: not this turn's, and said
                    session.event("events_after_turn_end", turn=request.turn, count=len(after),
                                  events=[TurnEvents.plain(e) for e in after[:20]])
                return
            self._too_many(events)
        raise TurnError(f"the agent's TurnReply ended no turn: none of its {len(reply.events)} events is turn_end, "
                        "handoff, session_end or error (every turn ends with exactly one)", raw=events.raw)

    @staticmethod
    def _too_many(events: TurnEvents) -> None:
        if len(events.raw) >= MAX_EVENTS:
            raise TurnError(f"more than {MAX_EVENTS} events in one turn without an end", raw=events.raw[-20:])

    def _agent_turn(self, events: TurnEvents, sent_at: float, session: Session) -> AgentTurn:
        document = events.response()
        handed = events.handoff or handoff_by_spec(self.spec.handoff, events.text, [document])
        if handed is not None:
            session.event("handoff", to=handed.to, summary=handed.summary)
        if events.session_end is not None:
            session.event("session_end", **events.session_end)
        if events.unmatched_results:
            session.event("unmatched_tool_result", ids=events.unmatched_results)
        completed = events.ended_at_ms if events.ended_at_ms is not None else session.now_ms()
        return AgentTurn(
            text=events.text, response=document, raw=events.raw, tool_calls=events.calls, sent_at_ms=sent_at,
            first_token_at_ms=events.first_token_at_ms, completed_at_ms=completed, handoff=handed,
            ended=handed is not None or events.session_end is not None or self._agent_closed)
