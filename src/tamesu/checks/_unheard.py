"""The agent's traces a check needed that never came (`trace_not_found`), or came without the agent's span under
tamesu's (`trace_incomplete`: the rest of them may have come after the wait): a check that reads the agent's
spans and is not decided by those that did come cannot be made, and says which wait they missed.

"No tool called" read from a trace that never reached the receiver says nothing of the agent: its exporter
pointed elsewhere, or batched past `traces.wait`. The run is then an error of the environment's (exit 3, as a
tracing backend that cannot be asked), not the agent's failure, nor a pass on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tamesu.checks.base import RunView
from tamesu.errors import InfraError


@dataclass(frozen=True)
class Unheard:
    """The traces of the turns a check reads that never came, or came without the agent's span under tamesu's,
    with the wait they missed."""

    turns: dict[str, list[int]]
    """Each trace id that never came, with the turns (in view) that recorded it."""
    source: str
    """`receiver`, or the backend asked (`jaeger`, `tempo`)."""
    wait_s: float | None
    incomplete: dict[str, list[int]] = field(default_factory=dict)
    """Each trace id that came without the agent's span under tamesu's (`trace_incomplete`: its root on the
    agent's side, which ends last and so goes in a batching exporter's last batch), with its turns."""
    shared: dict[str, list[int]] = field(default_factory=dict)
    """Each trace id another run sent too while this one went (`trace_shared`: a suite's own fixed
    `traceparent`, runs in parallel), with its turns: its spans are of both runs, so nothing is decided by them."""
    other_spans: int = 0
    """Spans of traces no run sent that came while the run went: the agent's (or a gateway's before it) that
    started traces of their own instead of continuing the `traceparent` they were sent."""
    runs_alongside: int = 0
    """Other runs that went while this one did (`--parallel`): `other_spans` may be of their agents too."""
    silent: str = ""
    """Why the run's agent is taken to send no spans at all (none came in a whole `traces.wait` since tamesu
    started: `telemetry._silence`)."""
    waited_s: float | None = None
    """The shorter wait a silent agent's later run gave its spans."""

    def __bool__(self) -> bool:
        return bool(self.turns or self.incomplete or self.shared)

    def words(self) -> str:
        wait = _wait_said(self.wait_s) if self.waited_s is None else \
            f"{self.waited_s:g}s, not {_wait_said(self.wait_s)}"
        said = []
        if self.turns:
            ids = _ids_said(self.turns)
            how = f"no span of trace {ids} reached the receiver" if self.source == "receiver" else \
                f"{self.source} did not have trace {ids}"
            said.append(f"the agent's spans of {_turns_said(self.turns)} never came ({how} within {wait}: "
                        "trace_not_found)")
        if self.incomplete:
            said.append(f"the agent's spans of {_turns_said(self.incomplete)} came without its span under "
                        f"tamesu's within {wait} (trace {_ids_said(self.incomplete)}: trace_incomplete), so more "
                        "of them may have come too late")
        if self.shared:
            said.append(f"the agent's spans of {_turns_said(self.shared)} are of trace {_ids_said(self.shared)}, "
                        "which another run sent at the same time too (a traceparent the suite sets itself): whose "
                        "run each span is of cannot be told (trace_shared)")
        return "; ".join(said)

    def _whose(self) -> str:
        """The runs that went beside this one, whose the spans of traces no test sent may be too: none of those
        spans tells which run's agent it is of."""
        if not self.runs_alongside:
            return ""
        runs = "1 other run" if self.runs_alongside == 1 else f"{self.runs_alongside} other runs"
        return f" (while {runs} went too: some may be {'its' if self.runs_alongside == 1 else 'theirs'})"

    def undecided(self, came: str) -> InfraError:
        """What a check raises when what came does not decide it (`came`: what it found among them)."""
        if self.shared:
            return InfraError(f"{self.words()} ({came}); leave traceparent to tamesu, which sends each turn its "
                              "own, or run these tests one at a time")
        # an agent behind a traced caller that exports elsewhere (a gateway) has every trace incomplete: the
        # caller's span is the one under tamesu's
        who = "the agent and its caller (a traced gateway) export" if self.incomplete else "the agent exports"
        if self.turns and self.silent and not self.other_spans:
            # no span of its agent's ever came: a longer wait would not help, its instrumentation would
            return InfraError(f"{self.words()}, and those that came do not decide it ({came}); {self.silent}")
        if self.turns and self.other_spans:
            # the receiver heard the agent, on traces of its own: the header was lost on the way, or not read
            return InfraError(f"{self.words()}, and those that came do not decide it ({came}); {self.other_spans} "
                              f"span(s) of traces no test sent did come meanwhile{self._whose()}: the agent, or a "
                              "gateway in front of it, starts traces of its own instead of continuing the "
                              "traceparent tamesu sends (a gateway must pass the header on, and the agent's server "
                              "read it)")
        # with `traces.query` the agent exports to the backend asked, not to tamesu
        where = "tamesu's receiver" if self.source == "receiver" else self.source
        return InfraError(f"{self.words()}, and those that came do not decide it ({came}); raise traces.wait if "
                          f"they come late, or see that {who} to {where}")


def unheard(run: RunView) -> Unheard:
    """The run's `trace_not_found`, `trace_incomplete` and `trace_shared` traces recorded by the turns in view
    (all of them, or an `on_turn`'s)."""
    missing = {e.data.get("trace_id"): e.data for e in run.events if e.name == "trace_not_found"}
    partial = {e.data.get("trace_id"): e.data for e in run.events if e.name == "trace_incomplete"}
    both = {e.data.get("trace_id") for e in run.events if e.name == "trace_shared"}
    turns: dict[str, list[int]] = {}
    incomplete: dict[str, list[int]] = {}
    shared: dict[str, list[int]] = {}
    for exchange in run.exchanges:
        trace_id = exchange.agent.trace_id
        if trace_id is not None and trace_id in both:
            shared.setdefault(trace_id, []).append(exchange.index)
        if trace_id is not None and trace_id in missing:
            turns.setdefault(trace_id, []).append(exchange.index)
        elif trace_id is not None and trace_id in partial:
            incomplete.setdefault(trace_id, []).append(exchange.index)
    data = next((missing[t] for t in turns), None) or next((partial[t] for t in incomplete), {})
    wait = data.get("wait_s")
    others = data.get("other_spans")
    beside = data.get("runs_alongside")
    return Unheard(turns, str(data.get("source") or "receiver"), float(wait) if isinstance(wait, int | float)
                   else None, incomplete, shared, others if isinstance(others, int) else 0,
                   beside if isinstance(beside, int) else 0, str(data.get("silent") or ""),
                   float(waited) if isinstance(waited := data.get("waited_s"), int | float) else None)


def _turns_said(traces: dict[str, list[int]]) -> str:
    turns = sorted({turn for recorded in traces.values() for turn in recorded})
    return f"turn {turns[0]}" if len(turns) == 1 else f"turns {', '.join(map(str, turns))}"


def _ids_said(traces: dict[str, list[int]]) -> str:
    return ", ".join(list(traces)[:3]) + (f" and {len(traces) - 3} more" if len(traces) > 3 else "")


def _wait_said(wait_s: float | None) -> str:
    return f"traces.wait ({wait_s:g}s)" if wait_s is not None else "traces.wait"
