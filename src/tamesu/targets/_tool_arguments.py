"""A tool call's arguments an agent wrote as JSON text (rest's `tool_calls`, a voice agent's messages, a Realtime
function call), read: JSON that Python cannot read (nested past its recursion limit, a number of more than 4,300
digits) or nested deeper than `MAX_JSON_DEPTH` is the agent's failed turn naming the tool. Kept, it ended the test
as tamesu's own bug (`internal error: RecursionError`, or `Maximum serialization depth exceeded` when the run's
records were written), blamed on the environment. And a model target's call whose arguments it could not read
(`unreadable_call`)."""

from __future__ import annotations

import json

from tamesu.conversation import Session, ToolCall, TurnError
from tamesu.models.base import TOO_DEEP_ARGUMENTS, ToolRequest
from tamesu.net.json_depth import MAX_JSON_DEPTH, deeper_than

_EXCERPT = 200


def read_arguments(text: str, tool: str) -> object:
    """The JSON value `text` holds; broken JSON raises `json.JSONDecodeError` (each target keeps it as written),
    JSON no one can read here a TurnError."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _unreadable(tool, "JSON nested more levels deep than Python reads", text) from None
    except ValueError as exc:  # int_max_str_digits: not JSON's fault, nor a decoding error
        why = "a number of more than 4,300 digits" if "digits" in str(exc) else f"JSON Python does not read ({exc})"
        raise _unreadable(tool, why, text) from None
    # brackets counted first (in C): only arguments that could be that deep are walked
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and deeper_than(value):
        raise _unreadable(tool, f"JSON nested more than {MAX_JSON_DEPTH} levels deep", text)
    return value


def _unreadable(tool: str, why: str, text: str) -> TurnError:
    shown = text if len(text) <= _EXCERPT else f"{text[:_EXCERPT]}... ({len(text):,} characters)"
    return TurnError(f"the agent called {tool or 'a tool with no name'} with arguments that cannot be read: {why}: "
                     f"{shown}", raw=text[:_EXCERPT])


def unreadable_call(session: Session, name: str, request: ToolRequest, why: str) -> ToolCall:
    """A model's call whose arguments were no JSON object: no tool is called with arguments made up from them (it
    answered a call nobody made), and a `tool_arguments_invalid` event and metric say so. Broken JSON is answered
    as the tool's error, and the model may call it again, as an agent's runtime answers it; arguments nested more
    than `MAX_JSON_DEPTH` levels are valid JSON that runtime would have called the tool with, so the turn fails:
    told they were unreadable, the model went on in a conversation production never has (and the run passed)."""
    session.count("tool_arguments_invalid")
    session.event("tool_arguments_invalid", tool=name, arguments=request.written, error=why)
    if why == TOO_DEEP_ARGUMENTS:
        raise TurnError(f"the model called {name} with arguments that cannot be read: JSON nested more than "
                        f"{MAX_JSON_DEPTH} levels deep, more than a run's records hold: the tool was not called")
    return ToolCall(name=name, result={"error": f"{why}; the tool was not called: call it again with its arguments "
                                                "as one JSON object"})
