"""A function call the Realtime agent makes: parsed, answered from `tool_results` (or as the test's
`fuzz_tools` says for that tool), and recorded as a tool call."""

from __future__ import annotations

import json
from typing import Any

from tamesu.conversation import Session, ToolCall, TurnError
from tamesu.errors import TemplateError
from tamesu.fuzzing import fuzz_for, fuzzed_call
from tamesu.targets._tool_arguments import read_arguments
from tamesu.targets.realtime.parts import Reply
from tamesu.targets.realtime.spec import RealtimeSpec, answer


def call_args(event: dict[str, Any], name: str) -> dict[str, object]:
    """The call's arguments as a mapping: JSON that does not parse, or is not an object, is kept as written; JSON
    that cannot be read fails the turn (`_tool_arguments`)."""
    try:
        args = read_arguments(event.get("arguments") or "{}", name)
    except json.JSONDecodeError:
        return {"_unparsed": event.get("arguments")}
    return args if isinstance(args, dict) else {"_value": args}


async def answered_call(spec: RealtimeSpec, session: Session, name: str, args: dict[str, Any],
                        reply: Reply) -> ToolCall:
    """The call with the result the test declares for it (or its fuzzed stand-in), added to the reply."""

    def declared() -> ToolCall:
        try:
            result, _declared = answer(spec, name, args, session.context)
        except TemplateError as exc:
            raise TurnError(f"tool {name}: cannot write its result: {exc}", raw=reply.raw) from None
        return ToolCall(name=name, args=args, result=result)

    fuzz = fuzz_for(session, name)
    if fuzz is not None:
        async def real() -> ToolCall:
            return declared()

        call = await fuzzed_call(session, fuzz, name, args, real)
    else:
        call = declared()
    reply.calls.append(call)
    return call
