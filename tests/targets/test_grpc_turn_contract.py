"""The turn API's contract, every turn ends with exactly one of turn_end, handoff, session_end or error
(docs/grpc.md), held against an agent that breaks it, served here on a free port: events after a turn's end
are said and never credited to the next turn; a unary TurnReply without an end fails its turn."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessions import new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.targets.grpc_turn.target import GrpcSpec, GrpcTarget
from tamesu.turn.v1 import turn_pb2
from turn_agents import serving

E = turn_pb2.AgentEvent
END = E(turn_end=turn_pb2.TurnEnd())


def _answer(text: str) -> list[turn_pb2.AgentEvent]:
    """`twoends`: a turn, then a stray delta and a second end; `noend`: a delta and nothing to end the turn."""
    if text == "twoends":
        return [E(delta=turn_pb2.TextDelta(text="one")), END, E(delta=turn_pb2.TextDelta(text="LEAK")), END]
    if text == "noend":
        return [E(delta=turn_pb2.TextDelta(text="no end here"))]
    return [E(delta=turn_pb2.TextDelta(text=f"you said {text}")), END]


@pytest.fixture
async def agent_url() -> AsyncIterator[str]:
    async with serving(_answer) as url:
        yield url


@pytest.mark.parametrize("mode", ["stream", "unary"])
async def test_events_after_a_turns_end_are_said_and_not_credited_to_the_next_turn(agent_url: str, mode: str,
                                                                                   tmp_path: Path) -> None:
    # before, on the stream: turn 2 was answered "LEAK" (the rest of turn 1), and every later turn shifted by one;
    # on unary the events past the first end were dropped without a word
    session = new_session(tmp_path)
    target = GrpcTarget(GrpcSpec.model_validate({"type": "grpc", "url": agent_url, "mode": mode,
                                                 "turn_timeout": 10}), "careless")
    await target.open(session)
    try:
        assert (await target.send(UserTurn(text="twoends"))).text == "one"
        # the stray events arrive before the next turn is sent: on the stream, the first is waited for (a fixed
        # 0.3 s was all a loaded machine had), then a moment for the one sent with it
        deadline = time.monotonic() + 30
        while mode == "stream" and not (target._ahead is not None and target._ahead.done()) \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        assert (await target.send(UserTurn(text="hello"))).text == "you said hello"
        assert (await target.send(UserTurn(text="again"))).text == "you said again"
    finally:
        await target.close()
    [said] = [e.data for e in session.events if e.name == "events_after_turn_end"]
    assert said == {"turn": 1, "count": 2, "events": [{"delta": {"text": "LEAK"}}, {"turn_end": {}}]}


async def test_a_unary_reply_that_ends_no_turn_fails_it(agent_url: str, tmp_path: Path) -> None:
    # before: the reply was taken as a finished turn, "no end here", though the agent never ended it
    session = new_session(tmp_path)
    target = GrpcTarget(GrpcSpec.model_validate({"type": "grpc", "url": agent_url, "mode": "unary"}), "careless")
    await target.open(session)
    try:
        with pytest.raises(TurnError, match=r"^the agent's TurnReply ended no turn: none of its 1 events is "
                                            r"turn_end, handoff, session_end or error \(every turn ends with exactly "
                                            r"one\)$"):
            await target.send(UserTurn(text="noend"))
    finally:
        await target.close()
