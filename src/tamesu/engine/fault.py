"""Whose fault a run that did not pass is: `environment` (the infrastructure, a judge whose verdict cannot be
taken: an error), `suite` (what the suite asks cannot be done, found only at run time, as a golden file it
lacks: an error, set by the grading), `simulated_user`
(tamesu's own model-played user broke its part, so the run is `inconclusive`), or `agent` (every other
failure). The simulated user is audited only after a failed run (see `roles.audit`), and after a passed one
in which it ended the conversation before anything was said (a pass of nothing). `agents_side` marks an
infrastructure error that came from the target itself with an `agent_error` event."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

from tamesu.conversation import Exchange, Session
from tamesu.errors import InfraError, OwnSideError, SuiteProblem
from tamesu.models.base import ModelError
from tamesu.models.client import ModelRegistry
from tamesu.plan import PlannedTest
from tamesu.results.records import RunResult
from tamesu.roles.audit import Finding, SimulatorAudit, deterministic_finding
from tamesu.roles.transcript import lines_of

AUDIT_MODEL = "simulator_audit"


class _AgentsSide:
    # a class, not @contextlib.contextmanager: entered every turn, and the generator's machinery was some
    # ten calls each time
    def __init__(self, session: Session) -> None:
        self._session = session

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: TracebackType | None) -> None:
        # a SuiteProblem (a visual baseline not written yet) is the suite's, an OwnSideError (tamesu's
        # speech-to-text behind the call) the environment's: neither is the agent's side
        if isinstance(exc, InfraError | ModelError) and not isinstance(exc, SuiteProblem | OwnSideError):
            self._session.event("agent_error", reason=str(exc))
        # returns None: the exception is raised on as it was


def agents_side(session: Session) -> contextlib.AbstractContextManager[None]:
    """An infrastructure error opening or talking to the target (unreachable, refused, its model down) is the
    agent's side failing, not tamesu's helpers': an `agent_error` event says so (JSONL `--yao-errors` counts
    it as the agent's failure, as the design does)."""
    return _AgentsSide(session)


async def attribute(result: RunResult, exchanges: Sequence[Exchange], test: PlannedTest,
                    models: ModelRegistry | None, record: Callable[..., object]) -> None:
    """Set `fault` and `fault_reason` on a run that did not pass; a failed run the simulated user spoiled
    becomes `inconclusive`. An audit model that cannot answer makes the run an error (the environment's)."""
    if result.status == "error":
        # the suite's own error (grading found it asking what cannot be done) stays the suite's
        result.fault, result.fault_reason = result.fault if result.fault == "suite" else "environment", result.error
        return
    if result.status == "passed" and not exchanges:
        # nothing was said on either side: a pass says nothing of the agent (`not_contains` holds of no answer)
        finding = _ended_before_speaking(result, [])
        if finding is not None:
            _spoiled(result, finding, record)
        return
    if result.status != "failed":
        return
    # a check scoped to one turn names it, as every report says it (report/words.failure_said)
    failures = [f"{a.name}{'' if a.on_turn is None else f' (turn {a.on_turn})'}" + (f": {a.reason}" if a.reason else "")
                for a in result.failed_assertions]
    lines = lines_of(exchanges, history=False)  # the audit weighs the simulated user's words, not the test's
    try:
        finding = _ended_before_speaking(result, lines) or await _audit(lines, test, models, failures)
    except InfraError as exc:
        result.status, result.error = "error", str(exc)
        result.fault, result.fault_reason = "environment", str(exc)
        return
    if finding is not None:
        _spoiled(result, finding, record)
        return
    result.fault, result.fault_reason = "agent", "; ".join(failures) or "the run failed"


def _spoiled(result: RunResult, finding: Finding, record: Callable[..., object]) -> None:
    record("simulator_audit", check=finding.check, reason=finding.reason, evidence=finding.evidence,
           **({"model": finding.model} if finding.model else {}))
    result.status = "inconclusive"
    result.fault, result.fault_reason = "simulated_user", finding.reason


def _ended_before_speaking(result: RunResult, lines: Sequence[Mapping[str, object]]) -> Finding | None:
    """The simulated user ended the conversation before its first message: the agent was never asked
    anything, so no check that failed says anything of it (the audit reads the user's lines, and there are
    none). Only the model's own end counts: its last `simulator` event names the run's end reason."""
    if any(line.get("role") == "user" for line in lines):
        return None
    asked = [event for event in result.events if event.name == "simulator"]
    if not asked or asked[-1].data.get("stop") != result.end_reason:
        # a JSONL case's user side (`roles.case_user`) notes its decisions as `user_side` events instead: its
        # simulator (a model, a script, another agent) ended the conversation when its last one says `end`
        noted = [event for event in result.events if event.name == "user_side"]
        ended = result.end_reason in ("goal_achieved", "simulator_stopped")
        if not (ended and noted and noted[-1].data.get("next") == "end"):
            return None
    return Finding(f"the simulated user ended the conversation ({result.end_reason}) before its first message: "
                   f"the agent was never asked anything")


async def _audit(lines: Sequence[Mapping[str, object]], test: PlannedTest, models: ModelRegistry | None,
                 failures: list[str]) -> Finding | None:
    if not any(line.get("source") == "simulator" for line in lines):
        return None  # nobody but the tester spoke for the user: there is no simulated user to blame
    persona = test.spec.persona
    finding = deterministic_finding(lines, persona.facts if persona is not None else None)
    if finding is not None or models is None or AUDIT_MODEL not in models.specs:
        return finding
    about = persona.model_dump(exclude_none=True, exclude_defaults=True, exclude={"behaviors"}) if persona else {}
    return await SimulatorAudit(models.client(AUDIT_MODEL)).audit(lines, about, test.spec.scenario.goal, failures)
