"""What a request costs beneath httpx's client: httpx's own transport (httpcore, anyio) against tamesu's
(`tamesu.net.aio`: aiohttp), the same `httpx.AsyncClient` above both.

    python bench/transport.py [--conversations 200] [--turns 5] [--rounds 5]

Conversations as the REST benchmark has them (a client per conversation, `--turns` posts of a small JSON body
to `bench/agents.py` in a process of its own, the answer's JSON read), at 1 and at 100 at once, in one process:
CPU (`time.process_time`) per request, the sides alternating within each round, the ratio the median of the
rounds' own ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import httpx
from run import Agent  # bench/ is a folder of scripts: run from it, or with it first on the path

from tamesu.net.aio import aio_transport
from tamesu.net.tls import platform_context

SIDES = ("httpx transport", "tamesu transport")


def make_client(side: str) -> httpx.AsyncClient:
    if side == "tamesu transport":
        return httpx.AsyncClient(timeout=60, transport=aio_transport(httpx))
    return httpx.AsyncClient(timeout=60, verify=platform_context())  # built once, as tamesu's is


async def conversation(side: str, url: str, turns: int) -> None:
    session = uuid.uuid4().hex
    async with make_client(side) as client:
        for turn in range(turns):
            answer = await client.post(url, json={"message": f"step {turn + 1}", "session_id": session})
            if answer.status_code != 200 or "echo" not in answer.json()["text"]:
                raise SystemExit(f"{side}: unexpected answer {answer.status_code} {answer.text[:200]}")


async def cpu_per_request(side: str, url: str, conversations: int, turns: int, at_once: int) -> float:
    slots = asyncio.Semaphore(at_once)

    async def one() -> None:
        async with slots:
            await conversation(side, url, turns)

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(conversations)))
    return (time.process_time() - started) / (conversations * turns) * 1000


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    agent = Agent()
    url = f"{agent.url}/chat"
    try:
        await cpu_per_request(SIDES[0], url, 20, args.turns, 10)  # warm both paths' imports and caches
        await cpu_per_request(SIDES[1], url, 20, args.turns, 10)
        for at_once in (1, 100):
            figures: dict[str, list[float]] = {side: [] for side in SIDES}
            for number in range(args.rounds):
                for side in SIDES if number % 2 == 0 else SIDES[::-1]:
                    figures[side].append(await cpu_per_request(side, url, args.conversations, args.turns, at_once))
            ratios = [ours / theirs for ours, theirs in zip(figures[SIDES[1]], figures[SIDES[0]], strict=True)]
            print(f"{at_once} at once, {args.rounds} rounds of {args.conversations} x {args.turns} requests, "
                  f"CPU per request (median): httpx transport {statistics.median(figures[SIDES[0]]):.3f} ms, "
                  f"tamesu transport {statistics.median(figures[SIDES[1]]):.3f} ms, ratio "
                  f"{statistics.median(ratios):.2f}x (rounds {', '.join(f'{r:.2f}' for r in ratios)})")
    finally:
        agent.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
