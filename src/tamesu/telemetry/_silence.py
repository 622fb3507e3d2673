"""Whether an agent (a suite's target) has sent any span since tamesu started: one that is not instrumented, or
exports elsewhere, sends none, and a run of it that waited all of `traces.wait` for spans that never came shows
it. Its later runs (and the turns of a JSONL case whose checkpoints read spans) then wait a quarter of `wait`
for a first span, not all of it each time, and the run that showed it says so once. A span of its traces that
comes at any time (a late one too) brings back the whole wait: an agent that exports is waited for as before.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AgentHeard:
    """One agent's spans over the whole invocation, shared by its runs."""

    name: str
    """The target as the suite names it."""
    where: str
    """Where its spans are looked for: the receiver's endpoint, or the backend asked (`jaeger at URL`)."""
    spans: int = 0
    """Spans of its runs' traces that came, in time or late."""
    silent_after: float | None = None
    """The wait (seconds) a run of it waited whole with none of its spans come: it is silent from then on,
    until one comes."""

    @property
    def silent(self) -> bool:
        return self.silent_after is not None and not self.spans

    def heard(self) -> None:
        self.spans += 1

    def waited_in_vain(self, wait: float) -> str | None:
        """A run of it waited all of `wait` and none of its spans has come since tamesu started: the words that
        say it, the first time only (None after, or once a span came)."""
        if self.spans or self.silent_after is not None or wait <= 0:  # no wait: nothing to wait less
            return None
        self.silent_after = wait
        return self.question()

    def question(self) -> str:
        wait = self.silent_after or 0.0
        return (f"no span from {self.name} came in {wait:g}s (none since tamesu started): is it instrumented and "
                f"exporting to {self.where}?")
