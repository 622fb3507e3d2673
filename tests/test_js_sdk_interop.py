"""Remote agents and the example shop agent as the JavaScript A2A SDK's client meets them: every binding of
both protocol versions, and a 0.3 card read as a 0.3 client reads it (`additionalInterfaces`), where the gRPC
address must be in a form grpc-js dials and the A2A TCK's 0.3 client reads. The SDK comes from npm
(`make js-sdk`); without it these skip."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from lifeline import tied
from remote.test_remote_agents import BILLING, agents
from test_example_a2a_shop import STATUS_REPLY, Shop, shop  # noqa: F401  (shop is the shared fixture)

JS = Path(__file__).parent / "js"
CLIENT = JS / "a2a_js_client.mjs"
COMBOS = ["JSONRPC@1.0", "HTTP+JSON@1.0", "GRPC@1.0", "JSONRPC@0.3", "HTTP+JSON@0.3", "GRPC@0.3",
          "JSONRPC@0.3@legacy", "HTTP+JSON@0.3@legacy", "GRPC@0.3@legacy"]

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (JS / "node_modules" / ".installed").exists(),
    reason="the JavaScript A2A SDK is not installed: `make js-sdk` (needs node and npm)")


async def _js_client(card_url: str, text: str) -> list[dict[str, Any]]:
    process = await asyncio.create_subprocess_exec(
        *tied(["node", str(CLIENT), card_url, text, *COMBOS]), cwd=JS,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)  # the script gives up at 60 s
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert len(lines) == len(COMBOS), out.decode() + err.decode()
    return lines


def _check(lines: list[dict[str, Any]], grpc_address: str, reply: str) -> None:
    failed = [line for line in lines if not line["ok"]]
    assert not failed, failed
    for line in lines:
        assert line["state"] == "TASK_STATE_COMPLETED" and reply in line["text"], line
    grpc = [line for line in lines if line["binding"] == "GRPC"]
    # 1.0 bare; 0.3 (and the 0.3 card's own field) in the form the A2A TCK's 0.3 client reads too
    assert [line["url"] for line in grpc] == [grpc_address, *[f"dns://{grpc_address}/{grpc_address}"] * 2]
    tck_target = urlparse(grpc[1]["url"])
    assert f"{tck_target.hostname}:{tck_target.port}" == grpc_address  # what the TCK dials (a bare one: None:80)
    assert [line["transport"] for line in grpc] == ["GrpcTransport", "_LegacyGrpcTransport", "_LegacyGrpcTransport"]


async def test_the_js_sdk_speaks_to_a_remote_agent_on_every_binding_and_version(tmp_path: Path) -> None:
    async with agents(tmp_path, {"billing": BILLING}) as group:
        urls = group.urls["billing"]
        lines = await _js_client(urls["card"], "Please refund my order")
    _check(lines, urls["grpc"], "Refund issued, reference RF-889")


async def test_the_js_sdk_speaks_to_the_example_shop_on_every_binding_and_version(shop: Shop) -> None:  # noqa: F811
    lines = await _js_client(f"{shop.origin}/.well-known/agent-card.json", "Hi, where is my order ORD-1001?")
    _check(lines, shop.grpc.removeprefix("grpc://"), STATUS_REPLY)
