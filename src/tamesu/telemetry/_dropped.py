"""What of the agent's spans no run kept, and why, counted for the run's warnings: spans of traces no test sent,
late ones (by run, and by name for each run's result.json), spans refused or sent twice, values cut, ids runs
shared, traces that never came. The collector (`collector`) counts; this says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tamesu.telemetry.spans import MAX_VALUE_CHARS

_LATE_NAMES = 20  # the names of a run's late spans counted apart (`Dropped.late_in`); the rest as other names

GRPC_REFUSED = ("this receiver speaks OTLP over HTTP (http/protobuf or http/json), not gRPC: set "
                "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
"""What the run says of an exporter that spoke OTLP over gRPC to tamesu's receiver, and what the exporter is told."""


@dataclass
class Dropped:
    """Spans no run kept, for the run's warnings."""

    other_spans: int = 0
    other_traces: int = 0
    late_spans: int = 0
    late_runs: dict[str, int] = field(default_factory=dict)
    """The late spans by the run they were of (`suite/test run N`), first come first."""
    late_in: dict[str, dict[str, int]] = field(default_factory=dict)
    """The late spans' names, counted, by the folder of the run they were of (`late_named`)."""
    grpc_exports: int = 0
    """Connections (or requests) of an exporter speaking OTLP over gRPC, refused."""
    rejected_spans: int = 0
    """Spans left out of an export for a bad id (the rest of it kept: OTLP's partial success)."""
    rejected_why: str = ""
    cut_values: int = 0
    """Attribute values (and span names, status messages) cut to `spans.MAX_VALUE_CHARS`."""
    duplicate_spans: int = 0
    """Spans that came again (the same trace and span id), kept once."""
    shared_ids: set[str] = field(default_factory=set)
    """Trace ids sent by more than one run (a `traceparent` the suite sets itself, the same for every run)."""
    pending: dict[str, tuple[set[str], float]] = field(default_factory=dict)
    """By graded run (its label): its traces that never came (or came without the agent's span under tamesu's)
    and of which no late span has come either, with the run's `traces.wait`. What is left at the end may still
    be batched in the agent: the last runs' late spans come after tamesu exited, when nothing can say them."""

    def late_named(self, folder: str, name: str, by: int) -> None:
        """`late_in` of the run in `folder` (none: no run's) counted `by` for a span named `name` (past
        `_LATE_NAMES` names, as ""): said in its result.json at the end (`engine._late_spans`)."""
        if not folder:
            return
        named = self.late_in.setdefault(folder, {})
        key = name if name in named or len(named) < _LATE_NAMES else ""
        named[key] = named.get(key, 0) + by
        if not named[key]:
            del named[key]
        if not named:
            del self.late_in[folder]

    def words(self) -> list[str]:
        said = []
        if self.rejected_spans:
            said.append(f"traces: {self.rejected_spans} span(s) were left out of the agent's exports "
                        f"({self.rejected_why}); the rest of those exports were kept")
        if self.cut_values:
            said.append(f"traces: {self.cut_values} text(s) longer than {MAX_VALUE_CHARS:,} characters (attribute "
                        "values, span names, status messages) were cut to it (marked '… [cut: N characters in all]')")
        if self.duplicate_spans:
            said.append(f"traces: {self.duplicate_spans} span(s) came again (the same trace and span id: an exporter's "
                        "retry, or two exporters set up in the agent) and were kept once")
        if self.grpc_exports:
            said.append(f"traces: {self.grpc_exports} export(s) came over gRPC and were refused: {GRPC_REFUSED}")
        if self.shared_ids:
            said.append(f"traces: {len(self.shared_ids)} trace id(s) were sent by more than one run (a traceparent "
                        "the suite sets itself, the same in every run): their spans went to every run that had sent "
                        "the id and was not graded yet when they came, and checks of them in runs that went at once "
                        "were not decided; leave traceparent to tamesu, which sends each turn its "
                        f"own: {', '.join(sorted(self.shared_ids)[:3])}")
        if self.other_spans:
            said.append(f"traces: {self.other_spans} span(s) of {self.other_traces} trace(s) no test sent "
                        "were dropped")
        if self.late_spans:
            runs = [f"{label} ({count})" if label else f"({count})" for label, count in self.late_runs.items()]
            whose = f": {', '.join(runs[:5])}" + (f" and {len(runs) - 5} more run(s)" if len(runs) > 5 else "") \
                if any(self.late_runs) else ""
            said.append(f"traces: {self.late_spans} span(s) arrived after their run was graded (raise traces.wait)"
                        f"{whose}")
        if self.pending:
            said.append(self._pending_words())
        return said

    def _pending_words(self) -> str:
        traces = sum(len(ids) for ids, _wait in self.pending.values())
        labels = [label or "(a run)" for label in self.pending]
        runs = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
        wait = max(wait for _ids, wait in self.pending.values())
        return (f"traces: {traces} trace(s) of {len(labels)} run(s) had not come when tamesu stopped listening: "
                f"{runs}; an agent that batches its spans may send them later still (the OpenTelemetry SDKs "
                "every 5 s unless OTEL_BSP_SCHEDULE_DELAY says otherwise), after tamesu exited for the last runs, "
                "so no warning can say they came late: give the agent OTEL_BSP_SCHEDULE_DELAY well below "
                f"traces.wait ({wait:g}s), or raise traces.wait")
