"""The model target's `max_response_bytes` through the real provider clients (openai, anthropic) against the
local model servers: an answer past it is refused as it is read, never retried, and fails the turn saying so
(`response_truncated` records it); the same client, called outside the model target (a judge), is unbounded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from model_servers import AnthropicServer, OpenAIServer, text
from sdk_groups import IN_PROCESS_SDKS
from sessions import new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.models.base import Message, ModelRequest
from tamesu.models.client import ModelRegistry
from tamesu.models.spec import ModelSpec
from tamesu.targets.model import ModelTarget, ModelTargetSpec

pytestmark = IN_PROCESS_SDKS
LIMIT = 100_000
SERVERS: dict[str, Callable[[], Any]] = {"openai": OpenAIServer, "anthropic": AnthropicServer}


@pytest.mark.parametrize("provider", list(SERVERS))
async def test_an_answer_past_the_limit_is_refused_once_and_fails_the_turn(provider: str, serve: Any,
                                                                           tmp_path: Path) -> None:
    server = SERVERS[provider]()
    base_url = server.base_url(serve(server.app).url)
    models = ModelRegistry({"target": ModelSpec(provider=provider, model="m", base_url=base_url, api_key="k")})
    session = new_session(tmp_path, models=models)
    target = ModelTarget(ModelTargetSpec.model_validate({"type": "model", "max_response_bytes": LIMIT}), "bot")
    server.plan(text("hello back"), text("x" * 300_000), text("y" * 300_000))
    await target.open(session)
    try:
        assert (await target.send(UserTurn(text="hello"))).text == "hello back"  # under the limit
        with pytest.raises(TurnError) as refused:
            await target.send(UserTurn(text="tell me everything"))
        # the judge's calls go through the same client, outside the target's bound
        judged = await models.client("target").generate(
            ModelRequest(purpose="judge", messages=[Message(role="user", content="grade")]))
    finally:
        await target.close()
        await models.aclose()
    said = str(refused.value)
    assert said.startswith("the model's answer was refused: ") and "larger than max_response_bytes (100,000)" in said
    assert said.endswith("(raise the target's max_response_bytes to read it)")
    [cut] = [e.data for e in session.events if e.name == "response_truncated"]
    assert cut["limit"] == LIMIT and cut["complete"] is False
    assert len(server.calls()) == 3  # the refused answer was not asked for again
    assert judged.text == "y" * 300_000
