"""`fuzz_tools`: make a tool (or a remote agent) misbehave on purpose, to test how the agent copes.

A test names tools and a mode for each: `fuzz_tools: {get_order: error, search: {mode: delay, delay: 3s}}`.

- `error`: the call fails; the caller sees `{"error": message}` (default: a service-unavailable message).
- `empty`: the call answers nothing (an empty text).
- `hostile`: the call answers a prompt injection (`text`, default `HOSTILE_TEXT`, which asks the agent to end
  its answer with `INJECTION_MARKER`; the `prompt_injection` pack fails a run whose agent did).
- `delay`: the real answer, held back `delay` (default 5s) first; with a shorter `call_timeout` the call
  times out instead.
- `custom`: your answer: `data` (any JSON) or `text`. A tool answers `data` when given, else `text`; a remote
  agent answers both, as a data part and a text part.

The modes live here, not in one target, because the model and mcp targets and the remote agents share them.
Every fuzzed call is a `tool_fuzzed` event and counts in the `tools_fuzzed` metric.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from tamesu.conversation import Session, ToolCall
from tamesu.suite.fuzz import DEFAULT_ERROR, FUZZ_MODES, HOSTILE_TEXT, INJECTION_MARKER, FuzzSpec

__all__ = ["DEFAULT_ERROR", "FUZZ_MODES", "HOSTILE_TEXT", "INJECTION_MARKER", "FuzzSpec", "fuzz_for", "fuzzed_call"]


def fuzz_tools_of(session: Session) -> Mapping[str, FuzzSpec]:
    """The test's `fuzz_tools`, which the engine puts on the session (values parsed here if it did not)."""
    # getattr: a Session built before the engine set `fuzz_tools` (tests, older callers) fuzzes nothing.
    raw: Mapping[str, object] = getattr(session, "fuzz_tools", None) or {}
    return {name: spec if isinstance(spec, FuzzSpec) else FuzzSpec.model_validate(spec) for name, spec in raw.items()}


def fuzz_for(session: Session, tool: str) -> FuzzSpec | None:
    return fuzz_tools_of(session).get(tool)


async def fuzzed_call(
    session: Session, spec: FuzzSpec, name: str, args: Mapping[str, object], real: Callable[[], Awaitable[ToolCall]]
) -> ToolCall:
    """One call to a fuzzed tool, recorded; `real` makes the real call (only `delay` uses it)."""
    session.event("tool_fuzzed", tool=name, mode=spec.mode)
    session.count("tools_fuzzed")
    if spec.mode == "delay":
        await asyncio.sleep(spec.hold_seconds())
        return await real()
    return ToolCall(name=name, args=args, result=spec.tool_result())
