"""One scripted turn's agent exchange, layer by layer, in one process: what the wire costs beneath the engine.

    python bench/rest_layers.py [--requests N] [--rounds R]

Against `bench/agents.py` (its own process), one request at a time, this process's CPU per request
(`time.process_time`), the median of R rounds, the layers in an order that alternates between rounds:
- the rest target's `Http.build` + `Http.fetch` (aiohttp's `ClientSession` through `tamesu.net.direct`, the
  body read to the limit, decoded and parsed; httpx's API over `tamesu.net.aio` before issue 28's sixth pass);
- a bare httpx client over `tamesu.net.aio` (`post` + `json()`);
- a bare httpx client on its own transport (httpcore);
- a bare aiohttp `ClientSession` (`post` + `json()`): the floor of issue 28's goals.
The difference between the first and the last is what the rest target's own work costs above the wire
(docs/performance.md, issue 28's fourth and sixth passes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import Agent  # noqa: E402  (bench/ is a folder of scripts, not a package)

BODY = {"message": "step 1", "session_id": "bench"}


async def layers(url: str, requests: int, rounds: int) -> dict[str, list[float]]:
    import aiohttp
    import httpx

    from tamesu.conversation import Session
    from tamesu.net.aio import aio_transport
    from tamesu.suite.schema import ConnectSpec
    from tamesu.suite.secrets import Secrets
    from tamesu.suite.templates import Context
    from tamesu.targets.rest.http import Http

    folder = Path(tempfile.mkdtemp(prefix="tamesu-layers-"))
    secrets = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=secrets), artifacts_dir=folder,
                      redactor=secrets.redactor, run_id="bench", base_dir=folder)
    http = Http(session=session, connect=ConnectSpec(), pool_timeout=60, what="rest target", max_bytes=10_000_000)
    over_aio = httpx.AsyncClient(timeout=60, transport=aio_transport(httpx))
    httpcore = httpx.AsyncClient(timeout=60)
    bare = aiohttp.ClientSession()

    async def target() -> None:
        await http.fetch(http.build("POST", url, {}, BODY, has_body=True))

    async def httpx_over_aio() -> None:
        (await over_aio.post(url, json=BODY)).json()

    async def httpx_own() -> None:
        (await httpcore.post(url, json=BODY)).json()

    async def aiohttp_bare() -> None:
        async with bare.post(url, json=BODY) as answer:
            await answer.json()

    sides: dict[str, Callable[[], Awaitable[None]]] = {
        "the rest target (Http.build + fetch)": target, "httpx over tamesu.net.aio": httpx_over_aio,
        "httpx on httpcore": httpx_own, "aiohttp (the floor)": aiohttp_bare}
    figures: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for send in sides.values():
            for _ in range(200):  # connections and caches warm
                await send()
        for number in range(rounds):
            order = list(sides.items())
            for name, send in order if number % 2 == 0 else order[::-1]:
                started = time.process_time()
                for _ in range(requests):
                    await send()
                figures[name].append((time.process_time() - started) / requests * 1000)
    finally:
        await http.aclose()
        await over_aio.aclose()
        await httpcore.aclose()
        await bare.close()
        shutil.rmtree(folder, ignore_errors=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    agent = Agent()
    try:
        figures = asyncio.run(layers(f"{agent.url}/chat", args.requests, args.rounds))
    finally:
        agent.stop()
    for name, values in figures.items():
        print(f"{name}: {statistics.median(values):.3f} ms per request (rounds "
              f"{', '.join(f'{v:.3f}' for v in values)})")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
