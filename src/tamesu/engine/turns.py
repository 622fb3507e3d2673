"""The conversation of one run: the target opened, the user side and the agent turn by turn, the target closed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from tamesu import targets
from tamesu.conversation import Exchange, Session, TurnError
from tamesu.engine import metrics as metric_math
from tamesu.engine.capture import capture_from, why_unset
from tamesu.engine.fault import agents_side
from tamesu.engine.grading import unasked
from tamesu.engine.traces import expect_turn
from tamesu.errors import InfraError, SuiteProblem, TemplateError
from tamesu.models.base import Models
from tamesu.plan import PlannedTest
from tamesu.roles.extractor import Extractor
from tamesu.roles.simulator import ModelSimulator, ScriptedUser, UserSimulator
from tamesu.targets.base import Target, TargetSpec
from tamesu.targets.bounds import DEFAULT_MAX_RESPONSE_BYTES, bound_turn, checked_turn
from tamesu.targets.handoff_signal import signalled
from tamesu.telemetry import otel
from tamesu.telemetry.collector import RunSpans, heard_unasked
from tamesu.telemetry.traceparent import TraceContext


async def _spans_so_far(test: PlannedTest, user: UserSimulator, spans: RunSpans | None,
                        exchanges: list[Exchange]) -> None:
    """The agent's spans of the turns so far handed to a user side that decides by them (a JSONL case's
    checkpoint over them), once they came: waited for as a run's are before it is graded (`settle`), within
    `traces.wait` of the last turn's end. A backend (`traces.query`) is asked only at the run's end."""
    if spans is None or not exchanges:  # most runs: no `traces:`, asked nothing more each turn
        return
    traces = test.suite.traces
    if traces is None or traces.query is not None or not user.reads_spans(exchanges):
        return
    await spans.settle(traces.wait, [t for e in exchanges if (t := e.agent.trace_id)])
    spans.hush(traces.wait)  # an agent none of whose spans came in it: its later turns wait less
    user.spans_came(list(spans.kept))


async def converse(
    test: PlannedTest, session: Session, user: UserSimulator, exchanges: list[Exchange], captured: dict[str, object],
    spans: RunSpans | None = None, made: list[Target[TargetSpec]] | None = None,
) -> tuple[Any, str | None, dict[str, float]]:
    """The persona loop. Returns the end reason, a failure the agent owns (or None), the target's metrics once it
    is closed; `made` gets the target, whose counts a run cut short by its timeout still reports."""
    target = targets.target_class(test.target.type)(test.target, test.target_name)
    if made is not None:
        made.append(target)
    with contextlib.ExitStack() as conversation:
        # a target that connects before its first turn asks for the conversation's trace (its handshake's);
        # with OpenTelemetry its span then lasts until the target is closed (tamesu.telemetry.traceparent)
        def conversation_trace() -> TraceContext:
            trace = conversation.enter_context(otel.active().conversation(test=test.id, target=test.target_name))
            if spans is not None:
                spans.expect(trace.trace_id, None, trace.span_id)
            return trace

        session.conversation_trace_factory = conversation_trace
        end, failure = await _talk(test, target, session, user, exchanges, captured, spans)
    # read once the target is closed: what closing sends (an a2a task waiting for input cancelled) is counted too
    return end, failure, target.metrics()


async def _talk(
    test: PlannedTest, target: Target[TargetSpec], session: Session, user: UserSimulator, exchanges: list[Exchange],
    captured: dict[str, object], spans: RunSpans | None = None,
) -> tuple[object, str | None]:
    extractor = _extractor(test, session.models)
    try:
        with agents_side(session):
            await _open(target, session)
            session.reads_reply = lambda: _reads_reply(test, target, user)
            try:  # a script's first `wait_for` waits from here: the greeting is heard within its timeout
                session.greeting_wait_s = user.listening_from(time.monotonic())
                greeted_from, first = time.time_ns(), await target.greeting()
            except TurnError as exc:
                session.event("turn_failed", turn=1, reason=str(exc))
                where = "turn 1 (the agent's greeting)" if target.greets_first() else "before the first turn"
                return "turn_failed", f"{where}: {exc}"
        if (unconnected := _unconnected(test, target)) is not None:
            return "turn_failed", unconnected
        spoken = targets.has_audio(test.target.type, test.target)
        if first is not None:
            first.spoken = spoken
            first.trace_id = first.trace_id or target.turn_trace_id(session)
            exchanges.append(Exchange(1, None, first))
            heard_unasked(spans, 1, greeted_from)
            await capture_from(first, test.spec.capture, captured, session, extractor)
            if first.ended:
                return "agent_ended", None
        # a browser test's steps are its turns: all of them are taken, whatever max_turns says
        turns_left = max(test.spec.scenario.max_turns, len(test.spec.steps))
        simulator = user if isinstance(user, ModelSimulator) else None  # an ABC's check: once, not every turn
        session.next_words = lambda: user.upcoming(session.context)  # a voice synthesises them ahead
        while turns_left > 0:
            await _spans_so_far(test, user, spans, exchanges)
            try:
                action = await user.next_turn(exchanges, session.context)
            except TemplateError as exc:
                said = why_unset(exc, test.spec.capture, captured, exchanges)
                return "script_done", f"the next user turn could not be written: {said}"
            except InfraError:
                if simulator is not None:  # the answers it gave up on are the error's story
                    _simulator_attempts(simulator, session, gave_up=True)
                raise
            if simulator is not None:
                asked = _simulator_attempts(simulator, session)
                if asked:  # with the words it was given: a change of prompt explains a change of conversation,
                    # and the model that answered (the one configured, or its fallback) a change of voice
                    last = simulator.responses[-1] if simulator.responses else None
                    session.event("simulator", reasoning=simulator.last_reasoning, stop=action.stop,
                                  prompt=simulator.prompt.version,
                                  model=None if last is None else f"{last.provider}:{last.model}".rstrip(":"))
            if action.note:
                session.event("user_side", **action.note)
            if action.listen is not None:
                if (end := await _hear_more(test, target, session, action.listen, exchanges, captured, spoken,
                                            extractor, spans)) is not None:
                    return end
                continue
            turns_left -= 1
            if action.turn is None:
                return action.stop or "simulator_stopped", action.failure
            index = len(exchanges) + 1
            sent_at = session.now_ms()
            session.in_flight, session.in_flight_trace = (index, action.turn, sent_at), None
            try:
                with otel.active().turn(test=test.id, turn=index) as trace:
                    session.trace = trace
                    expect_turn(spans, trace.trace_id, index, trace.span_id)  # before the agent can answer
                    try:
                        with agents_side(session):
                            agent = checked_turn(await target.send(action.turn), target.kind)
                    finally:
                        sent_trace = session.in_flight_trace = target.turn_trace_id(session)
                        session.trace = None  # what the target sends between turns is no turn's
                        if spans is not None:
                            spans.turn_ended(trace.trace_id, sent_trace)
            except TurnError as exc:
                session.in_flight = None
                # what the agent did before it failed, and how long it took to fail, are the turn's
                failed = metric_math.failed_turn(exc, sent_at, session.now_ms(), sent_trace)
                for call in failed.tool_calls:
                    call.turn = index
                exchanges.append(Exchange(index, action.turn, failed))
                session.event("turn_failed", turn=index, reason=str(exc))
                what = "step" if action.turn.source == "step" else "turn"
                return "turn_failed", f"{what} {index}: {exc}"
            except TemplateError as exc:  # `{{captured.x}}` in a request before anything captured it
                session.in_flight = None
                said = f"turn {index}: the request could not be written: {exc}"
                if not exchanges and _captured(exc):  # nothing heard yet: no agent could have given it a value
                    raise SuiteProblem(f"{said}: nothing is captured before the first turn") from None
                if _captured(exc):  # the agent never said what the capture looks for: as a script step's would be
                    reason = f"turn {index}: the request could not be written: " + \
                        why_unset(exc, test.spec.capture, captured, exchanges)
                    session.event("turn_failed", turn=index, reason=reason)
                    return "turn_failed", reason
                raise InfraError(said) from None
            session.in_flight = None
            agent.trace_id = agent.trace_id or sent_trace
            expect_turn(spans, agent.trace_id, index)  # a trace id the target learned while sending
            agent.spoken = spoken
            agent = bound_turn(signalled(target, agent, session), target.spec.max_response_bytes, session, index)
            for call in agent.tool_calls:
                call.turn = index
            exchanges.append(Exchange(index, action.turn, agent))
            await capture_from(agent, test.spec.capture, captured, session, extractor)
            if agent.handoff is not None:
                return "handoff", None
            if agent.ended:
                return "agent_ended", None
        # a script said to its last step as the last turn allowed ended as any other script does
        return ("script_done" if isinstance(user, ScriptedUser) and user.exhausted else "max_turns"), None
    finally:
        try:
            await asyncio.shield(target.close())
        except Exception as exc:
            session.event("close_failed", reason=f"{type(exc).__name__}: {exc}")


async def _open(target: Target[TargetSpec], session: Session) -> None:
    """Open the target. A `{{captured.NAME}}` it renders as it opens (a plug-in's key, the text of a
    `system_file`; validate refuses those of the built-in types' keys) can never have a value, nothing being
    said yet: the suite's mistake (exit 2), not the infrastructure's."""
    try:
        await target.open(session)
    except (InfraError, TemplateError) as exc:
        if isinstance(exc, SuiteProblem) or not _captured(exc):
            raise
        raise SuiteProblem(f"{exc}: the target renders it as it opens, before the first turn, so nothing is "
                           "captured yet") from None


def _captured(exc: BaseException) -> bool:
    """Whether `exc` is, or was raised for, a `{{captured.NAME}}` that had no value (targets wrap it)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, TemplateError) and (seen.expr or "").startswith("captured."):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _simulator_attempts(user: ModelSimulator, session: Session, gave_up: bool = False) -> bool:
    """Record each answer of the simulator's last ask that was not taken as it came (asked again, or read after
    a repair; the last answer of an ask it gave up on was not asked again); whether the model was asked at all
    (the script's steps ask none)."""
    asked = bool(user.last_attempts)
    for attempt in unasked(user.last_attempts) if gave_up else user.last_attempts:
        if attempt.outcome == "rejected":
            session.event("simulator_reasked", attempt=attempt.number, reason=attempt.reason)
        elif attempt.outcome == "repaired":
            session.event("simulator_repaired", attempt=attempt.number, reason=attempt.reason)
    user.last_attempts = []
    return asked


async def _hear_more(
    test: PlannedTest, target: Target[TargetSpec], session: Session, timeout: float, exchanges: list[Exchange],
    captured: dict[str, object], spoken: bool, extractor: Extractor | None, spans: RunSpans | None = None,
) -> tuple[object, str | None] | None:
    """The agent's next utterance, unprompted (a `wait_for` still listening), as a turn without a user turn;
    the conversation's end when it failed or the agent ended it, else None. Listening takes no turn of
    `max_turns`: the wait's `timeout` bounds it."""
    index = len(exchanges) + 1
    if timeout <= 0 and not target.hears_late:  # a late look: nothing is heard behind a target that reads at once
        return None
    try:
        since, more = time.time_ns(), await target.listen(timeout)
    except TurnError as exc:
        session.event("turn_failed", turn=index, reason=str(exc))
        return "turn_failed", f"turn {index} (listening): {exc}"
    if more is None:
        return None
    more = checked_turn(more, target.kind)
    more.spoken = spoken
    more.trace_id = more.trace_id or target.turn_trace_id(session)
    more = bound_turn(signalled(target, more, session), target.spec.max_response_bytes, session, index)
    exchanges.append(Exchange(index, None, more))
    heard_unasked(spans, index, since)
    await capture_from(more, test.spec.capture, captured, session, extractor)
    if more.handoff is not None:
        return "handoff", None
    return ("agent_ended", None) if more.ended else None


def _reads_reply(test: PlannedTest, target: Target[TargetSpec], user: UserSimulator) -> bool:
    """Whether anything reads the words of the agent's reply being heard now before the call is over: the user
    side, a capture, the target's handoff signal, or a cut at a `max_response_bytes` of the suite's own."""
    return (bool(test.spec.capture) or target.spec.handoff is not None
            or target.spec.max_response_bytes != DEFAULT_MAX_RESPONSE_BYTES or user.reads_reply())


def _unconnected(test: PlannedTest, target: Target[TargetSpec]) -> str | None:
    """The failure of a session that never reached the agent (a busy or unanswered call), unless the test
    asserts how it ended: then that assertion grades it, and a suite can expect a busy line."""
    why = target.never_connected()
    if why is None or any(a.check.grades_unconnected for a in test.assertions):
        return None
    return f"before the first turn: {why}"


def _extractor(test: PlannedTest, models: Models | None) -> Extractor | None:
    if models is None or not any(c.extract for c in test.spec.capture):
        return None
    return Extractor(models.client("extract"))
