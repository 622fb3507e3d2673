"""The grpc target's `max_response_bytes`: a message past it is refused by the channel (gRPC's
`max_receive_message_length`), a stream of small events past it in one turn is refused by the target; both
fail the turn saying so and record `response_truncated`. Against a turn-API agent served here on a free port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessions import new_session
from tamesu.conversation import Session, TurnError, UserTurn
from tamesu.targets.grpc_turn.target import GrpcSpec, GrpcTarget
from tamesu.turn.v1 import turn_pb2
from turn_agents import serving

LIMIT = 100_000


def _answer(text: str) -> list[turn_pb2.AgentEvent]:
    """`huge`: one delta of 300 kB; `many`: 60 deltas of 5 kB (each under the limit, 300 kB in all)."""
    if text == "huge":
        deltas = ["x" * 300_000]
    elif text == "many":
        deltas = ["y" * 5_000] * 60
    else:
        deltas = [f"you said {text}"]
    return [*(turn_pb2.AgentEvent(delta=turn_pb2.TextDelta(text=d)) for d in deltas),
            turn_pb2.AgentEvent(turn_end=turn_pb2.TurnEnd())]


@pytest.fixture
async def agent_url() -> AsyncIterator[str]:
    async with serving(_answer, max_send_message_length=10_000_000) as url:
        yield url


def _session(tmp_path: Path) -> Session:
    return new_session(tmp_path)


async def _refusal(url: str, mode: str, said: str, tmp_path: Path) -> tuple[TurnError, Session]:
    session = _session(tmp_path)
    spec = GrpcSpec.model_validate({"type": "grpc", "url": url, "mode": mode, "max_response_bytes": LIMIT,
                                    "turn_timeout": 30})
    target = GrpcTarget(spec, "talker")
    await target.open(session)
    try:
        assert (await target.send(UserTurn(text="hello"))).text == "you said hello"  # under the limit
        with pytest.raises(TurnError) as refused:
            await target.send(UserTurn(text=said))
    finally:
        await target.close()
    return refused.value, session


@pytest.mark.parametrize("mode", ["stream", "unary"])
async def test_a_message_past_the_limit_is_refused_and_said(agent_url: str, mode: str, tmp_path: Path) -> None:
    error, session = await _refusal(agent_url, mode, "huge", tmp_path)
    assert str(error).startswith("a message of the answer was larger than max_response_bytes (100,000), then "
                                 "refused ("), str(error)
    assert str(error).endswith("(raise the target's max_response_bytes to read it)")
    [cut] = [e.data for e in session.events if e.name == "response_truncated"]
    assert cut["limit"] == LIMIT and cut["complete"] is False


async def test_a_stream_of_small_events_past_the_limit_is_refused(agent_url: str, tmp_path: Path) -> None:
    error, session = await _refusal(agent_url, "stream", "many", tmp_path)
    assert str(error).startswith("the turn's events were larger than max_response_bytes (100,000): read "), error
    [cut] = [e.data for e in session.events if e.name == "response_truncated"]
    assert LIMIT < cut["read"] < LIMIT + 6_000  # it stopped at the event that passed the limit


@pytest.fixture
async def small_inbox_url() -> AsyncIterator[str]:
    """A turn-API agent that takes messages of at most 2,000 bytes (gRPC's `max_receive_message_length`)."""
    async with serving(_answer, max_receive_message_length=2_000) as url:
        yield url


@pytest.mark.parametrize("mode", ["stream", "unary"])
async def test_a_turn_larger_than_the_agent_takes_is_said_as_ours(small_inbox_url: str, mode: str,
                                                                   tmp_path: Path) -> None:
    # before: "a message of the answer was larger than max_response_bytes ... (raise the target's
    # max_response_bytes to read it)": the agent had refused our request, and the advice could not help
    error, session = await _refusal(small_inbox_url, mode, "z" * 5_000, tmp_path)
    said = str(error)
    assert said.startswith("the agent refused the user turn: its 5,0"), said
    assert "larger than the agent takes (2,000 bytes; its grpc.max_receive_message_length)" in said, said
    assert "max_response_bytes" not in said and not [e for e in session.events if e.name == "response_truncated"]
