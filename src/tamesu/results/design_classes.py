"""The agent test design's error classes over tamesu's, for a team migrating from its runner (`--yao-errors`)."""

from __future__ import annotations

from tamesu.results.records import RunResult


def design_classes(result: RunResult, simulator_error: str | None, dynamic: bool) -> None:
    """Reclassify a run that ended in error as the design does: an agent that fails (unreachable, refused) fails
    the run, where tamesu calls it an error (exit 3); a simulator that cannot give the next input skips a
    multi-turn case (the earlier revision: the turn is SKIPPED) and fails a dynamic one (the later). A judge or
    validator that fails stays an error."""
    if result.status != "error":
        return
    if simulator_error is not None:
        reason = f"simulator error: {simulator_error}"
        if dynamic:  # failed, as the design has it; still not the agent's fault but its helper's (the project's
            # own script's bug stays the suite's)
            result.status, result.error, result.fault_reason = "failed", reason, reason
            result.fault = "suite" if result.fault == "suite" else "environment"
        else:
            result.status, result.skip_reason, result.error = "skipped", reason, None
            result.fault = result.fault_reason = None
    elif any(event.name == "agent_error" for event in result.events):
        reason = f"agent error: {result.error}"
        result.status, result.error, result.fault, result.fault_reason = "failed", reason, "agent", reason
