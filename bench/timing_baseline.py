"""The timing baseline: how far a plain httpx client's own view of the timed agent is from its known delays.

    python bench/timing_baseline.py URL TURNS
Prints one JSON list of [first_token_error_ms, latency_error_ms] per turn. Whatever error this shows comes
from the agent and the loopback network, not from tamesu; tamesu's error beyond it is its own.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx

from agents import FIRST_MS, LAST_MS


async def main(url: str, turns: int) -> None:
    errors: list[list[float]] = []
    for _ in range(turns):
        # a client per conversation of 3 turns, as tamesu opens one per run
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(3):
                started = time.monotonic()
                first = None
                async with client.stream("POST", url, json={"message": "x"}) as answer:
                    async for line in answer.aiter_lines():
                        if line.startswith("data:") and first is None:
                            first = time.monotonic()
                ended = time.monotonic()
                errors.append([(first or ended) - started, ended - started])
    print(json.dumps([[a * 1000 - FIRST_MS, b * 1000 - LAST_MS] for a, b in errors]))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
