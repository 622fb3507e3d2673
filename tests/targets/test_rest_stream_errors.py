"""A streamed turn that the agent reports as failed (an SSE `event: error`, Anthropic's or OpenAI's error event, a
websocket's `{"type": "error"}`) fails with the agent's words, never graded as the reply it cut short (unless the
suite's `response.final` names that event); against the real agents of agents.rest_agents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.fixtures import RunningAgents, rest_agents
from sessions import new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.targets.rest.target import RestSpec, RestTarget

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


@pytest.mark.parametrize(("message", "said"), [
    ("overloaded", "overloaded_error: Overloaded"),  # Anthropic's `event: error`, then the stream ends
    ("gateway error", "upstream timed out"),  # an `event: error` whose data is text, then [DONE]
    ("chunk error", "server_error: server had an error"),  # OpenAI's chat stream: `{"error": {...}}`, then [DONE]
])
async def test_an_error_event_fails_the_streamed_turn(rest_agents: RunningAgents, tmp_path: Path, message: str,
                                                      said: str) -> None:
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": f"{rest_agents.url}/sse",
                                                 "streaming": "sse"}), "api")
    await target.open(new_session(tmp_path))
    try:
        with pytest.raises(TurnError) as failed:
            await target.send(UserTurn(text=message))
        assert str(failed.value) == f"the agent's stream reported an error: {said}"
        assert failed.value.raw is not None  # the error event, kept as the failed turn's answer
    finally:
        await target.close()


async def test_an_error_message_fails_the_websocket_turn(rest_agents: RunningAgents, tmp_path: Path) -> None:
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": rest_agents.ws_url,
                                                 "streaming": "websocket"}), "api")
    await target.open(new_session(tmp_path))
    try:
        with pytest.raises(TurnError, match=r"^the agent's stream reported an error: tool backend down$"):
            await target.send(UserTurn(text="error"))
    finally:
        await target.close()


async def test_a_final_of_the_suites_own_may_take_the_error_event_as_the_turns_end(rest_agents: RunningAgents,
                                                                                  tmp_path: Path) -> None:
    spec = {"type": "rest", "url": rest_agents.ws_url, "streaming": "websocket",
            "response": {"final": {"path": "$.type", "equals": "error"}}}
    target = RestTarget(RestSpec.model_validate(spec), "api")
    await target.open(new_session(tmp_path))
    try:
        turn = await target.send(UserTurn(text="error"))
    finally:
        await target.close()
    assert turn.response == {"type": "error", "message": "tool backend down"}


async def test_a_malformed_json_event_among_json_events_fails_the_turn(rest_agents: RunningAgents,
                                                                      tmp_path: Path) -> None:
    """Taken as a text chunk, `{"delta": " check` was spliced into the reply (`Let me{"delta": " check`)."""
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": f"{rest_agents.url}/sse",
                                                 "streaming": "sse"}), "api")
    await target.open(new_session(tmp_path))
    try:
        with pytest.raises(TurnError) as failed:
            await target.send(UserTurn(text="malformed"))
    finally:
        await target.close()
    assert str(failed.value) == ("malformed JSON in event 2 of the stream, whose other events are JSON: "
                                 "Unterminated string starting at: line 1 column 11 (char 10): {\"delta\": \" check")
    assert failed.value.raw == [{"delta": "Let me"}, '{"delta": " check']


async def test_a_text_stream_may_send_a_brace(rest_agents: RunningAgents, tmp_path: Path) -> None:
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": f"{rest_agents.url}/sse",
                                                 "streaming": "sse"}), "api")
    await target.open(new_session(tmp_path))
    try:
        turn = await target.send(UserTurn(text="braces"))
    finally:
        await target.close()
    assert turn.text == 'x = {"a": 1'


async def test_a_long_error_is_cut_at_a_word_and_never_says_the_start_of_a_secret(tmp_path: Path,
                                                                                   serve: Any) -> None:
    # before: cut bare at 300 characters, before the masking: a key the gateway quoted where the cut fell was said
    # up to it ("zq7-sse-5e0c"), since the masking knows a secret cut short only at an ellipsis
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    key = "zq7-sse-5e0c-9981"

    async def stream() -> AsyncIterator[str]:
        yield 'data: {"delta": "Let me"}\n\n'
        yield f"event: error\ndata: upstream refused: {'x' * 266} {key} was the key\n\n"

    url = serve(Starlette(routes=[Route("/sse", lambda _: StreamingResponse(stream(), media_type="text/event-stream"),
                                        methods=["POST"])])).url
    session = new_session(tmp_path, environ={"GATEWAY_KEY": key})
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": f"{url}/sse", "streaming": "sse"}), "api")
    await target.open(session)
    try:
        with pytest.raises(TurnError) as failed:
            await target.send(UserTurn(text="hi"))
    finally:
        await target.close()
    said = session.redactor.text(str(failed.value))
    assert said == f"the agent's stream reported an error: upstream refused: {'x' * 266}…", said
