"""A test whose `timeout` ran out: whose time it was decides what the run is.

The agent's (it was answering, or the user side waited on it): a failure of the conversation. Not the agent's (the
`before_each` hooks, or tamesu's own model, the simulated user or an extraction, was still answering): an error of
the environment, as a failing hook or a model that cannot answer is, never a failure blamed on the agent.
"""

from __future__ import annotations

from collections.abc import Sequence

from tamesu.conversation import Event
from tamesu.results.records import AssertionResult, RunResult


def timed_out(result: RunResult, limit: float, stopped: str | None, hooked: bool, cut: list[str],
              failures: list[AssertionResult], waiting: str = "") -> list[AssertionResult]:
    """Set `result`'s status, error and end; the run's failures from now on. `stopped`: Ctrl-C's or SIGTERM's
    reason; `cut`: tamesu's own model calls under way when the deadline passed (`queueing.Clock.cut`); `waiting`:
    what the agent was waiting on then (`in_flight`)."""
    if stopped is not None:
        result.status, result.error, result.end_reason = "error", stopped, "error"
        return []
    if not hooked or cut:
        result.status, result.end_reason = "error", "error"
        result.error = (f"before_each: the hooks were still running when the test's timeout ({limit:g}s) ran out"
                        if not hooked else f"the test's timeout ({limit:g}s) ran out during {' and '.join(cut)}, "
                        "not while the agent answered")
        return failures
    result.end_reason = "timeout"
    return [*failures, AssertionResult(name="conversation", passed=False,
                                       reason=f"the test took longer than its timeout ({limit:g}s){waiting}")]


def in_flight(events: Sequence[Event], at_ms: float) -> str:
    """The tool call the target had made and had no answer to when the deadline passed (an mcp target's
    `tool_call` event without its `tool_result`), as the timeout's reason says it: before, a test cut in a tool
    that hung said only that it "took longer than its timeout", as if the model had been slow."""
    waiting: dict[str, float] = {}
    for event in events:
        tool = event.data.get("tool")
        if isinstance(tool, str) and event.name == "tool_call":
            waiting[tool] = event.at_ms
        elif isinstance(tool, str) and event.name == "tool_result":
            waiting.pop(tool, None)
    if not waiting:
        return ""
    tool, since = max(waiting.items(), key=lambda item: item[1])
    return f"; a call to {tool} had waited {max(0.0, at_ms - since) / 1000:.1f}s for its answer"
