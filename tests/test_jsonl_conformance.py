"""The last conformance gaps of the JSONL side (issue 33) against real local agents: helper agents are told
`skip.history` as the design sends it, `-i` tells a message from a file as the design does, `tamesu validate`
reads a single-case `.json`, a static multi-turn case is headed by its turns, and the design's error classes
on request (`--yao-errors`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.a2a_agents import A2AAgents
from tamesu.engine.live import TargetHelper
from tamesu.suite.secrets import Secrets
from tamesu.targets.a2a import A2ASpec


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    with A2AAgents() as running:
        yield running


@pytest.mark.parametrize("binding", ["jsonrpc", "grpc"])
async def test_an_a2a_helper_agent_is_told_to_keep_no_history(agents: A2AAgents, tmp_path: Path,
                                                              binding: str) -> None:
    """The design's `Skip{History: true}` with every helper call; on A2A its one place is the message metadata."""
    url = agents.grpc_url if binding == "grpc" else f"{agents.urls['v10']}/a2a"
    spec = A2ASpec.model_validate({"type": "a2a", "url": url, "transport": binding})
    helper = TargetHelper("checker", spec, Secrets(environ={}), tmp_path)
    response, _ = await helper.ask("validator", {"test_id": "T001", "criteria": "helpful"}, None)
    received = response["artifacts"][0]["parts"][0]["data"]
    assert received["metadata"] == {"test_mode": "validator", "test_id": "T001", "criteria": "helpful",
                                    "skip": {"history": True}}
