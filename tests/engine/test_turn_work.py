"""What a turn costs tamesu beyond the wire (issue 28's ninth pass, docs/performance.md): each cut keeps what the
turn reads, sends and records, and is seen taken."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agents.fixtures import RunningAgents, rest_agents
from sessions import new_session
from tamesu.conversation import UserTurn
from tamesu.targets.rest.target import RestSpec, RestTarget

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


@asynccontextmanager
async def opened(spec: dict[str, Any], tmp_path: Path) -> AsyncIterator[RestTarget]:
    target = RestTarget(RestSpec.model_validate({"type": "rest", **spec}), "api")
    await target.open(new_session(tmp_path))
    try:
        yield target
    finally:
        await target.close()


async def test_a_rest_turn_sets_one_timer_its_own_timeout(rest_agents: RunningAgents, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # aiohttp's per-read timer (sock_read) was moved at every piece of the answer: two timer handles a turn more,
    # bounding reads the turn's own timeout already bounds
    loop = asyncio.get_running_loop()
    async with opened({"url": f"{rest_agents.url}/chat", "turn_timeout": "5s"}, tmp_path) as target:
        assert (await target.send(UserTurn(text="hi"))).text == "Echo 1: hi"  # connected, kept for the next turn
        timers: list[float] = []
        call_at = loop.call_at

        def counted(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            timers.append(when - loop.time())
            return call_at(when, *args, **kwargs)

        with monkeypatch.context() as patched:
            patched.setattr(loop, "call_at", counted)
            turn = await target.send(UserTurn(text="again"))
    assert turn.text == "Echo 2: again" and turn.status == 200
    assert len(timers) == 1 and 4 < timers[0] <= 5  # the turn's turn_timeout, and nothing else
