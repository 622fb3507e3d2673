"""The openai provider's call through `create` against through the SDK's `post` (`models/_sdk_post.py`), in one
process, the two paths alternating round by round against `bench/model_server.py` (its own process).

    python bench/model_post.py [--calls N] [--rounds R]

Each figure is this process's CPU per call (`time.process_time`), the median of the rounds; the request is the
simulator's (its prompt, a conversation so far, the structured-output schema).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from model_layers import ModelServer  # noqa: E402  (bench/ is a folder of scripts, not a package)
from persona_baseline import PROMPT, SCHEMA  # noqa: E402

import tamesu.models.openai as provider_module  # noqa: E402
from tamesu.models.base import Message, ModelRequest  # noqa: E402


async def measure(url: str, calls: int, rounds: int) -> dict[str, list[float]]:
    provider = provider_module.OpenAIProvider("bench", api_key="bench-key", base_url=f"{url}/v1")
    request = ModelRequest(purpose="simulator", json_schema=SCHEMA, messages=[
        Message(role="system", content=PROMPT), Message(role="user", content="user: hi\nagent: echo: hi")])
    figures: dict[str, list[float]] = {"post": [], "create": []}
    try:
        for _ in range(20):  # connections and imports warm
            await provider.generate(request)
        for number in range(rounds):
            for path in ("post", "create") if number % 2 == 0 else ("create", "post"):
                provider_module.create_is_plain = lambda plain=(path == "post"): plain  # type: ignore[misc]
                started = time.process_time()
                for _ in range(calls):
                    await provider.generate(request)
                figures[path].append((time.process_time() - started) / calls * 1000)
    finally:
        await provider.aclose()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    server = ModelServer()
    try:
        figures = asyncio.run(measure(server.url, args.calls, args.rounds))
    finally:
        server.stop()
    for path, values in figures.items():
        print(f"{path}: {statistics.median(values):.3f} ms per call (rounds {', '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
