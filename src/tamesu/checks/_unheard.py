"""The agent's traces a check needed that never came (`trace_not_found`): a check that reads the agent's spans
and is not decided by those that did come cannot be made, and says which wait they missed.

"No tool called" read from a trace that never reached the receiver says nothing of the agent: its exporter
pointed elsewhere, or batched past `traces.wait`. The run is then an error of the environment's (exit 3, as a
tracing backend that cannot be asked), not the agent's failure, nor a pass on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from tamesu.checks.base import RunView
from tamesu.errors import InfraError


@dataclass(frozen=True)
class Unheard:
    """The traces of the turns a check reads that never came, with the wait they missed."""

    turns: dict[str, list[int]]
    """Each trace id that never came, with the turns (in view) that recorded it."""
    source: str
    """`receiver`, or the backend asked (`jaeger`, `tempo`)."""
    wait_s: float | None

    def __bool__(self) -> bool:
        return bool(self.turns)

    def words(self) -> str:
        which = _turns_said(sorted({turn for recorded in self.turns.values() for turn in recorded}))
        wait = _wait_said(self.wait_s)
        ids = ", ".join(list(self.turns)[:3]) + (f" and {len(self.turns) - 3} more" if len(self.turns) > 3 else "")
        how = f"no span of trace {ids} reached the receiver" if self.source == "receiver" else \
            f"{self.source} did not have trace {ids}"
        return f"the agent's spans of {which} never came ({how} within {wait}: trace_not_found)"

    def undecided(self, came: str) -> InfraError:
        """What a check raises when what came does not decide it (`came`: what it found among them)."""
        return InfraError(f"{self.words()}, and those that came do not decide it ({came}); raise traces.wait if "
                          "they come late, or see that the agent exports to tamesu's receiver")


def unheard(run: RunView) -> Unheard:
    """The run's `trace_not_found` traces recorded by the turns in view (all of them, or an `on_turn`'s)."""
    missing = {e.data.get("trace_id"): e.data for e in run.events if e.name == "trace_not_found"}
    turns: dict[str, list[int]] = {}
    for exchange in run.exchanges:
        trace_id = exchange.agent.trace_id
        if trace_id is not None and trace_id in missing:
            turns.setdefault(trace_id, []).append(exchange.index)
    data = next((missing[t] for t in turns), {})
    wait = data.get("wait_s")
    return Unheard(turns, str(data.get("source") or "receiver"), float(wait) if isinstance(wait, int | float)
                   else None)


def late_note(run: RunView) -> str:
    """What a check that failed on the agent's spans adds when a trace it read came without the agent's span
    under tamesu's (`trace_incomplete`): more of it may have come after `traces.wait`, so the failure is said
    beside the wait (it stays the agent's: an agent whose caller exports elsewhere always has it)."""
    incomplete = {e.data.get("trace_id"): e.data for e in run.events if e.name == "trace_incomplete"}
    turns = sorted({e.index for e in run.exchanges if e.agent.trace_id in incomplete})
    if not turns:
        return ""
    wait = next(iter(incomplete.values())).get("wait_s")
    within = _wait_said(wait if isinstance(wait, int | float) else None)
    return (f" (the trace of {_turns_said(turns)} came without the agent's span under tamesu's within {within}: "
            "more of it may have come too late; raise traces.wait if so)")


def _turns_said(turns: list[int]) -> str:
    return f"turn {turns[0]}" if len(turns) == 1 else f"turns {', '.join(map(str, turns))}"


def _wait_said(wait_s: float | None) -> str:
    return f"traces.wait ({wait_s:g}s)" if wait_s is not None else "traces.wait"
