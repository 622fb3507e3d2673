"""What each layer of a simulated user's model call costs, in CPU per call, in one process.

    python bench/model_layers.py [--calls N] [--rounds R] [--shape openai|anthropic|both]

Against `bench/model_server.py` (its own process, so its CPU never counts), the same chat completion is made
by each layer in turn, from the bare HTTP client up to the simulator's structured call through tamesu's
`ResilientClient`; the rounds alternate the layers so the machine's noise falls on all of them alike, and
each figure is the median of the rounds' CPU per call (`time.process_time`, this process only). Each row says
which layer it is built on, and the difference is what it adds: the SDK's request building and parsing,
tamesu's provider, its client (cache check, retries, ledger, span), the structured-output reader.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from persona_baseline import PROMPT, SCHEMA  # noqa: E402  (bench/ is a folder of scripts, not a package)
from run import Agent  # noqa: E402


class ModelServer(Agent):
    script = "model_server.py"


def _body(shape: str) -> tuple[str, dict[str, Any]]:
    user = "user: Where is my order?\nagent: echo: Where is my order?"
    if shape == "anthropic":
        return "/v1/messages", {"model": "bench", "max_tokens": 1024, "system": PROMPT,
                                "messages": [{"role": "user", "content": user}]}
    return "/v1/chat/completions", {
        "model": "bench", "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": user}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}}


Call = Callable[[], Awaitable[Any]]


async def _layers(url: str, shape: str) -> tuple[dict[str, Call], Callable[[], Awaitable[None]]]:
    import httpx
    import httpx2

    from tamesu.models.base import Message, ModelRequest
    from tamesu.models.client import ModelRegistry
    from tamesu.models.spec import ModelSpec
    from tamesu.models.structured import ask_structured
    from tamesu.net.clients import ssl_context
    from tamesu.roles.simulator import SimulatorAnswer

    path, body = _body(shape)
    headers = {"authorization": "Bearer bench-key"}
    plain = httpx.AsyncClient(timeout=60, verify=ssl_context())
    plain2 = httpx2.AsyncClient(timeout=60, verify=ssl_context())
    base_url = f"{url}/v1" if shape == "openai" else url
    spec = ModelSpec.model_validate({"provider": shape, "model": "bench", "base_url": base_url,
                                     "api_key": "bench-key"})
    registry = ModelRegistry({"simulator": spec})
    client = registry.client("simulator")
    provider = client.provider()
    request = ModelRequest(purpose="simulator", messages=[
        Message(role="system", content=PROMPT),
        Message(role="user", content="user: Where is my order?\nagent: echo: Where is my order?")])
    with_schema = request.model_copy(update={"json_schema": SCHEMA})
    if shape == "openai":
        import openai
        from openai.types.chat import ChatCompletion

        sdk = openai.AsyncOpenAI(api_key="bench-key", base_url=base_url, max_retries=0, timeout=60,
                                 http_client=openai.DefaultAsyncHttpx2Client(verify=ssl_context()))
        sdk_path, typed, auth = "/chat/completions", ChatCompletion, {"security": {"bearer_auth": True}}
    else:
        import anthropic
        from anthropic.types import Message as WireMessage

        sdk = anthropic.AsyncAnthropic(api_key="bench-key", base_url=base_url, max_retries=0, timeout=60,
                                       http_client=anthropic.DefaultAsyncHttpxClient(verify=ssl_context()))
        sdk_path, typed, auth = "/v1/messages", WireMessage, {}

    async def bare_httpx() -> Any:
        return (await plain.post(url + path, json=body, headers=headers)).json()

    async def bare_httpx2() -> Any:
        return (await plain2.post(url + path, json=body, headers=headers)).json()

    async def sdk_raw() -> Any:
        return await sdk.post(sdk_path, cast_to=object, body=body, options=auth)

    async def sdk_typed() -> Any:
        return await sdk.post(sdk_path, cast_to=typed, body=body, options=auth)

    async def tamesu_provider() -> Any:
        return await provider.generate(with_schema)

    async def tamesu_client() -> Any:
        return await client.generate(with_schema)

    async def tamesu_structured() -> Any:
        return await ask_structured(client, request, SimulatorAnswer)

    async def close() -> None:
        await plain.aclose()
        await plain2.aclose()
        await sdk.close()
        await registry.aclose()

    return {"httpx post + json (the baseline's)": bare_httpx, "httpx2 post + json (the SDK's transport)": bare_httpx2,
            "SDK post, typed answer (what tamesu did before)": sdk_typed,
            "SDK post, JSON as dicts (cast_to=object)": sdk_raw, "tamesu provider.generate": tamesu_provider,
            "tamesu ResilientClient.generate": tamesu_client,
            "tamesu ask_structured (the simulator's call)": tamesu_structured}, close


ABOVE = {"httpx2 post + json (the SDK's transport)": "httpx post + json (the baseline's)",
         "SDK post, typed answer (what tamesu did before)": "httpx2 post + json (the SDK's transport)",
         "SDK post, JSON as dicts (cast_to=object)": "httpx2 post + json (the SDK's transport)",
         "tamesu provider.generate": "SDK post, JSON as dicts (cast_to=object)",
         "tamesu ResilientClient.generate": "tamesu provider.generate",
         "tamesu ask_structured (the simulator's call)": "tamesu ResilientClient.generate"}
"""Each layer and the one it is built on: the difference is what the layer adds."""


async def measure(url: str, shape: str, calls: int, rounds: int) -> list[dict[str, Any]]:
    layers, close = await _layers(url, shape)
    samples: dict[str, list[float]] = {name: [] for name in layers}
    try:
        for call in layers.values():  # warm every connection and cache once
            for _ in range(20):
                await call()
        for _ in range(rounds):
            for name, call in layers.items():
                started = time.process_time()
                for _ in range(calls):
                    await call()
                samples[name].append((time.process_time() - started) / calls * 1000)
    finally:
        await close()
    median = {name: statistics.median(values) for name, values in samples.items()}
    return [{"shape": shape, "layer": name, "cpu_ms_per_call": round(median[name], 3), "above": ABOVE.get(name),
             "added_ms": round(median[name] - median[ABOVE[name]], 3) if name in ABOVE else None,
             "spread_ms": [round(min(values), 3), round(max(values), 3)]} for name, values in samples.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", choices=["openai", "anthropic", "both"], default="both")
    args = parser.parse_args()
    shapes = ("openai", "anthropic") if args.shape == "both" else (args.shape,)
    server = ModelServer()
    try:
        rows = [row for shape in shapes for row in asyncio.run(measure(server.url, shape, args.calls, args.rounds))]
    finally:
        server.stop()
    print("| shape | layer | CPU per call | added, over | spread of the rounds |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        added = "" if row["added_ms"] is None else f"{row['added_ms']:+.3f} ms over {row['above']}"
        print(f"| {row['shape']} | {row['layer']} | {row['cpu_ms_per_call']:.3f} ms | {added} | "
              f"{row['spread_ms'][0]:.3f}-{row['spread_ms'][1]:.3f} ms |")
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
