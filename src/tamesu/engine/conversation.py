"""One run of one test: open the target, let the user side talk to it, close, grade."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tamesu import plugins, targets
from tamesu.checks.base import RunView
from tamesu.conversation import WRITE_GOLDEN, AgentTurn, Exchange, Session
from tamesu.engine import metrics as metric_math
from tamesu.engine.capture import unfound
from tamesu.engine.fault import attribute
from tamesu.engine.grading import completed_turns, grade, planned_checks, with_capture_notes
from tamesu.engine.hooks import HookFailed, HookGroup, run_hooks
from tamesu.engine.stop import RunStop
from tamesu.engine.timeouts import in_flight, timed_out
from tamesu.engine.traces import SuiteTraces, attach, failed_turn_said, spans_back, spans_warnings
from tamesu.engine.turns import converse
from tamesu.errors import BudgetExceeded, InfraError, SuiteProblem
from tamesu.models import queueing
from tamesu.models.base import ModelError
from tamesu.models.client import ModelRegistry
from tamesu.models.ledger import Ledger
from tamesu.models.said import one_line
from tamesu.plan import PlannedTest
from tamesu.remote.group import RemoteAgents
from tamesu.results.records import AssertionResult, RunResult, Transcript, TranscriptLine, TurnRecord
from tamesu.roles.counterpart import CounterpartUser
from tamesu.roles.simulator import ModelSimulator, ScriptedUser, UserSimulator
from tamesu.roles.steps import StepsUser
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context, Environ
from tamesu.targets.base import Target, TargetSpec
from tamesu.telemetry.spans import SpansFile


@dataclass
class Going:
    """How many runs are going right now, counted by `execute_run`: a 429 that outlasted its sends again says this
    figure, not `--parallel`'s, which is only how many may go (a test's last runs, a `load:` stage's)."""

    count: int = 0


@dataclass
class RunInputs:
    test: PlannedTest
    number: int
    attempt: int
    run_id: str
    artifacts_dir: Path
    secrets: Secrets
    before_each: list[HookGroup] = field(default_factory=list)
    after_each: list[HookGroup] = field(default_factory=list)
    models: ModelRegistry | None = None
    update_golden: bool = False
    write_golden: str = WRITE_GOLDEN
    going: Going = field(default_factory=lambda: Going())
    """The runs of the invocation going now (`execute_run` counts this one in while it goes)."""
    rerun: int = 0
    """The how-manieth new-seed run of an inconclusive one this is (0: the first)."""
    user_factory: Callable[[ModelRegistry | None, int], UserSimulator] | None = None
    """Who plays the user, given the run's models and seed; default `choose_user` (script or persona).
    JSONL tests bring their own (static turns, their simulator, a person, checkpoints)."""
    stop: RunStop | None = None
    """How a stopping run (Ctrl-C, SIGTERM) ends this one early: its deadline is moved to now."""
    traces: SuiteTraces | None = None
    """`traces:`: the agent's spans of this run's traces come back through it."""

    @property
    def seed(self) -> int:
        """One seed per run: stable across invocations, different for each repeat and each re-run."""
        digest = hashlib.sha256(self.test.id.encode()).hexdigest()
        return (int(digest[:8], 16) + self.number - 1 + self.rerun * 100_003) % 2**31


@dataclass
class RunOutcome:
    result: RunResult
    transcript: Transcript
    warnings: list[str] = field(default_factory=list)
    budget_exceeded: bool = False
    spans: SpansFile | None = None
    """spans.json, with `traces:`."""
    spent_ms: float = 0.0
    """The time of every attempt and rerun this run took (its result's own `duration_ms` is the last one's)."""
    rerun_with: str | None = "with a new seed"
    """What a rerun of this run, had its simulated user spoiled it, may play differently with (`UserSimulator`'s)."""


def template_context(test: PlannedTest, secrets: Secrets, captured: dict[str, object], run: dict[str, object],
                     remote: dict[str, object] | None = None) -> Context:
    # `remote` is filled in place once the run's remote agents have their ports
    return Context(secrets=secrets, env=Environ(), vars=test.vars, captured=captured, run=run,
                   remote=remote if remote is not None else {})


def choose_user(test: PlannedTest, models: ModelRegistry | None, seed: int,
                session: Session | None = None) -> UserSimulator:
    """The script alone, or a model playing the persona (after the script's steps) when one is configured;
    another target of the suite when the test names a `counterpart` (it needs the run's session)."""
    scenario = test.spec.scenario
    counterpart = test.spec.counterpart
    if test.spec.steps:
        return StepsUser(test.spec.steps)
    if counterpart is not None and session is not None:
        spec = test.suite.targets[counterpart.target]
        return CounterpartUser(targets.target_class(spec.type)(spec, counterpart.target), counterpart.target,
                               opening=counterpart.opening, goal=scenario.goal, session=session)
    attack = test.attack  # a red-team pack's attacker (`scenario.attack`)
    if models is not None and "simulator" in models.specs and (scenario.goal or test.spec.persona or attack):
        target = test.suite.targets.get(test.spec.target) if test.spec.target else None
        keypad = target is not None and targets.sends_dtmf(target.type, target)
        return ModelSimulator(models.client("simulator"), scenario, test.spec.persona, base_dir=test.suite.dir,
                              seed=seed, attack=attack, keypad=keypad)
    return ScriptedUser(scenario.script, test.suite.dir)


async def execute_run(inputs: RunInputs) -> RunOutcome:
    inputs.going.count += 1
    try:
        return await _execute_run(inputs)
    finally:
        inputs.going.count -= 1


async def _execute_run(inputs: RunInputs) -> RunOutcome:
    test = inputs.test
    started_wall = dt.datetime.now(dt.UTC)
    started = time.monotonic()
    captured: dict[str, object] = {}
    remote_urls: dict[str, object] = {}
    context = template_context(test, inputs.secrets, captured, {"id": inputs.run_id, "number": inputs.number},
                               remote_urls)
    run_ledger = inputs.models.ledger.scope() if inputs.models is not None else None
    session = Session(context=context, artifacts_dir=inputs.artifacts_dir, redactor=inputs.secrets.redactor,
                      run_id=inputs.run_id, base_dir=test.suite.dir, fuzz_tools=test.spec.fuzz_tools,
                      remote_agents=test.suite.spec.remote_agents,
                      persona=test.spec.persona, seed=inputs.seed)
    # the run's model clients charge its ledger and put their retries and timeouts on its timeline
    models = inputs.models.with_ledger(run_ledger, session.event) if inputs.models is not None and run_ledger else None
    session.models = models
    session.update_golden, session.write_golden = inputs.update_golden, inputs.write_golden
    session.runs_going = lambda: max(1, inputs.going.count)
    remote_agents = RemoteAgents(test.suite.spec.remote_agents, session, remote_urls)
    result = RunResult(
        suite=test.suite.name, test=test.name, run=inputs.number, attempt=inputs.attempt, status="passed",
        rerun=inputs.rerun, started_at=started_wall.isoformat(), target=test.target_name,
        target_type=test.target.type, vars=test.vars,
    )
    exchanges: list[Exchange] = []
    failures: list[AssertionResult] = []
    warnings: list[str] = []
    target_metrics: dict[str, float] = {}
    budget_exceeded = False
    user: UserSimulator | None = None
    run_spans = inputs.traces.run(f"{test.id} run {inputs.number}", test.target_name, str(inputs.artifacts_dir)) \
        if inputs.traces is not None else None
    made: list[Target[TargetSpec]] = []
    hooked = False
    timed_out_at: float | None = None
    try:
        async with asyncio.timeout(test.spec.timeout) as deadline, queueing.clock(deadline) as clock:  # see queueing
            if inputs.stop is not None:
                inputs.stop.watch(deadline)
            # within the deadline: Ctrl-C cuts a hook that is still running (it waited for it), and the test's
            # timeout counts it as the rest of the test
            await run_hooks(inputs.before_each, context, "before_each")
            hooked = True
            if inputs.user_factory is not None:
                user = inputs.user_factory(models, inputs.seed)
            else:
                user = choose_user(test, models, inputs.seed, session)
            if isinstance(user, CounterpartUser):
                remote_agents.others = user.speaking_at
            await remote_agents.start()  # before the target opens: its config may name their URLs
            result.end_reason, failure, target_metrics = await converse(test, session, user, exchanges, captured,
                                                                         run_spans, made)
        if failure:
            failures.append(AssertionResult(name="conversation", passed=False, reason=failure))
    except TimeoutError:
        # what the target counted before the deadline (its tool calls, timeouts, model calls) is kept
        target_metrics = _counted(made, warnings)
        # the moment the deadline passed, on the session's clock: the target closed after it
        late = asyncio.get_running_loop().time() - (deadline.when() or asyncio.get_running_loop().time())
        timed_out_at = session.now_ms() - max(0.0, late) * 1000
        failures = timed_out(result, test.spec.timeout, inputs.stop.reason if inputs.stop is not None else None,
                             hooked, clock.cut, failures, in_flight(session.events, timed_out_at))
    except (InfraError, HookFailed, ModelError) as exc:
        result.status, result.error, result.end_reason = "error", str(exc), "error"
        result.fault = "suite" if isinstance(exc, SuiteProblem) else None  # a browser's visual baseline not written
        target_metrics = _counted(made, warnings)  # result.json had a task_canceled event and no a2a_requests at all
    except BudgetExceeded as exc:
        result.status, result.error, result.end_reason = "error", str(exc), "error"
        budget_exceeded = True
        target_metrics = _counted(made, warnings)
    except Exception as exc:  # a bug of ours: the run is an error, the details go to the artifacts
        result.status, result.end_reason = "error", "error"
        result.error = unexpected(exc, inputs)
    finally:
        # before the after_each hooks: one that needs a capture no turn had says what the capture looked for
        unfound(test.spec.capture, captured, session, exchanges)
        try:
            await run_hooks(inputs.after_each, context, "after_each")
        except HookFailed as exc:
            warnings.append(with_capture_notes(str(exc), session.events))
        if isinstance(user, CounterpartUser):
            await user.aclose()
        await remote_agents.stop()  # after every run, a failed one too
        remote_agents.attach(exchanges)
        stopping = inputs.stop is not None and inputs.stop.reason is not None
        reached = bool(exchanges) or result.status != "error"
        recorded = [e.agent.trace_id for e in exchanges if e.agent.trace_id]
        carried = [str(e.data["trace_id"]) for e in session.events
                   if e.name == "conversation_trace" and e.data.get("trace_id")]
        spans_file, spans_error = await spans_back(inputs.traces, run_spans, stopping, reached, recorded, carried)
    if spans_error and result.status != "error":  # the tracing backend could not be asked: not the agent's
        result.status, result.error, result.end_reason = "error", spans_error, "error"
    if result.status != "error" and (broken := remote_agents.forward_failure()):
        result.status, result.error, result.end_reason = "error", broken, "error"
    if spans_file is not None:
        target_metrics.update(attach(spans_file, exchanges, session, inputs.traces))
        warnings.extend(spans_warnings(spans_file, inputs.traces))
        if failures and failures[0].name == "conversation":
            failures[0] = failed_turn_said(failures[0], spans_file, exchanges[-1].index if exchanges else None)
    spent = _spending(run_ledger)
    measured = metric_math.from_exchanges(exchanges, {**session.counters, **target_metrics, **spent})
    result.turns = [TurnRecord(index=e.index, user=e.user, agent=e.agent) for e in exchanges]
    if (cut := _cut_turn(result, session, failures, len(exchanges), timed_out_at)) is not None:
        result.turns.append(cut)
    result.metrics = measured.standard()
    result.captured = dict(captured)
    result.tool_calls = [call for e in exchanges for call in e.agent.tool_calls]
    result.events = session.events
    skipped = user.skipped if user is not None and result.status != "error" else None
    result.skip_reason = skipped

    async def settle() -> None:
        """The verdict: the checks graded, the failure attributed."""
        nonlocal budget_exceeded
        if result.status != "error":
            view = RunView(exchanges=exchanges, metrics=measured, captured=captured, events=session.events,
                           tool_calls=result.tool_calls, context=context, base_dir=test.suite.dir, vars=test.vars,
                           models=models, update_golden=inputs.update_golden, redactor=inputs.secrets.redactor,
                           write_golden=inputs.write_golden,
                           spans=spans_file.spans if spans_file is not None else None)
            # a skipped run grades only what happened: the assertions of the turns it reached; a failed
            # conversation only those of the turns that completed before it failed (tamesu.engine.grading)
            completed = completed_turns(result.end_reason, exchanges, session.events)
            reached = completed if completed is not None else len(exchanges) if skipped else None
            try:
                graded, grading_error, suites = await grade(test, view, reached=reached, record=session.event,
                                                            unexpected=lambda exc: unexpected(exc, inputs))
            except BudgetExceeded as exc:
                graded, grading_error, suites, budget_exceeded = [], str(exc), False, True
            result.assertions = [*failures, *graded]
            if completed is not None or skipped:
                # a skipped run's later checks too (a JSONL case's final assertions): counted, so each report
                # says they were not evaluated, and why, instead of leaving them out
                result.not_evaluated = planned_checks(test) - len(graded)
            if grading_error:
                # a judge that could not answer is broken infrastructure, not a verdict on the agent; what the
                # suite asks that cannot be done (a golden file not written yet) is the suite's
                result.status, result.error = "error", grading_error
                result.fault = "suite" if suites else None
            elif any(not a.passed for a in result.assertions):
                result.status = "failed"
            elif skipped:
                result.status = "skipped"
        else:
            result.not_evaluated = planned_checks(test)
        try:
            await attribute(result, exchanges, test, models, session.event)
        except BudgetExceeded as exc:  # the audit's model call was the one too many
            result.status, result.error = "error", str(exc)
            result.fault, result.fault_reason = "environment", str(exc)
            budget_exceeded = True

    try:
        # a stopping run (Ctrl-C, SIGTERM) cuts the grading as it cuts the conversation: a `command` check's
        # process or a judge's call is not waited for (its process group killed)
        async with asyncio.timeout(None) as grading:
            if inputs.stop is not None:
                inputs.stop.watch(grading)
            await settle()
    except TimeoutError:
        if inputs.stop is None or inputs.stop.reason is None:
            raise
        result.status, result.end_reason = "error", "error"
        result.error = f"{inputs.stop.reason} while the checks were graded"
        result.fault, result.fault_reason = "environment", result.error
        result.assertions, result.not_evaluated = [], planned_checks(test)
    # judges (and the audit) are paid after the conversation: the recorded totals include them
    result.metrics.update(_spending(run_ledger))
    result.duration_ms = round((time.monotonic() - started) * 1000, 3)
    result.warnings = warnings  # kept with the run (result.json, the HTML report), not only printed
    transcript = Transcript(test=test.name, run=inputs.number, lines=_lines(exchanges, cut))
    return RunOutcome(result, transcript, warnings, budget_exceeded, spans_file,
                      rerun_with=user.rerun_with if user is not None else None)


def crashed_run(inputs: RunInputs, exc: Exception) -> RunOutcome:
    """The outcome of a run whose own guards were passed by an exception: an error with its one line."""
    test = inputs.test
    result = RunResult(
        suite=test.suite.name, test=test.name, run=inputs.number, attempt=inputs.attempt, status="error",
        rerun=inputs.rerun, error=unexpected(exc, inputs), end_reason="error",
        started_at=dt.datetime.now(dt.UTC).isoformat(), target=test.target_name, target_type=test.target.type,
        vars=test.vars)
    result.fault, result.fault_reason = "environment", result.error
    return RunOutcome(result, Transcript(test=test.name, run=inputs.number))


def unexpected(exc: BaseException, inputs: RunInputs) -> str:
    """An exception nobody expected inside one run: its one line for the result, its traceback (masked)
    appended to the run's `traceback.txt` only, so the run ends as an error and the others go on."""
    with contextlib.suppress(OSError):  # a full disk must not turn one test's error into the run's crash
        inputs.artifacts_dir.mkdir(parents=True, exist_ok=True)
        with (inputs.artifacts_dir / "traceback.txt").open("a", encoding="utf-8") as handle:
            handle.write(inputs.secrets.redactor.text(
                "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
    whose = plugins.culprit(exc)
    return f"{f'{whose} raised' if whose else 'internal error:'} {type(exc).__name__}: {one_line(str(exc))} " \
           f"(traceback in {inputs.artifacts_dir.name}/traceback.txt)"


def _counted(made: list[Target[TargetSpec]], warnings: list[str]) -> dict[str, float]:
    """What the target counted, read once a deadline or an error ended the run (the target is closed by then:
    what closing sent is counted too)."""
    try:
        return made[0].metrics() if made else {}
    except Exception as exc:  # a plug-in's counts after an open that failed half-way: the run's own error stands
        warnings.append(f"the target's metrics could not be read: {type(exc).__name__}: {exc}")
        return {}


def _spending(ledger: Ledger | None) -> dict[str, float]:
    if ledger is None:
        return {}
    totals = ledger.totals()
    return {"llm_cost_usd": round(totals.usd, 6), "llm_tokens": float(totals.tokens),
            "llm_retries": float(totals.retries), "llm_timeouts": float(totals.timeouts)}


def _cut_turn(result: RunResult, session: Session, failures: list[AssertionResult], answered: int,
              at_ms: float | None) -> TurnRecord | None:
    """The user turn the test's timeout cut short while the agent answered it: sent, so shown, never answered.
    The run's exchanges leave it out (checks grade answers, metrics time them: it has neither)."""
    if result.end_reason != "timeout" or session.in_flight is None or session.in_flight[0] != answered + 1:
        return None
    index, said, sent_at = session.in_flight
    why = next((a.reason for a in failures if a.name == "conversation" and not a.passed), None)
    cut_at = max(sent_at, at_ms if at_ms is not None else session.now_ms())
    agent = AgentTurn(sent_at_ms=sent_at, completed_at_ms=cut_at, trace_id=session.in_flight_trace)
    return TurnRecord(index=index, user=said, agent=agent,
                      cut=why or "the test's timeout ran out")


def _lines(exchanges: list[Exchange], cut: TurnRecord | None = None) -> list[TranscriptLine]:
    lines: list[TranscriptLine] = []
    for e in exchanges:
        audio = e.agent.audio
        if e.user is not None:
            lines.append(TranscriptLine(
                role="user", text=e.user.display(), turn=e.index, at_ms=e.agent.sent_at_ms,
                **({"from_ms": audio.user_from_ms, "to_ms": audio.user_to_ms, "heard": audio.agent_heard_user}
                   if audio else {})))
        lines.append(TranscriptLine(
            role="agent", text=e.agent.text, turn=e.index, at_ms=e.agent.completed_at_ms,
            **({"from_ms": audio.agent_from_ms, "to_ms": audio.agent_to_ms, "heard": audio.agent_said,
                "heard_cut": audio.agent_said_cut} if audio else {})))
    if cut is not None and cut.user is not None:
        lines.append(TranscriptLine(role="user", text=cut.user.display(), turn=cut.index, at_ms=cut.agent.sent_at_ms,
                                    cut=cut.cut))
    return lines
