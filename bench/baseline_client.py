"""The baseline: the same conversations as tamesu runs, sent by a plain httpx loop and nothing else.

    python bench/baseline_client.py URL CONVERSATIONS TURNS CONCURRENCY [httpx|tamesu|aiohttp]
One AsyncClient per conversation (the fast way with httpx 0.28, see DESIGN.md), the SSL context built once. The
last argument picks the transport beneath the client: httpx's own (the default: the issue's bare loop), or
tamesu's (`tamesu.net.aio`: aiohttp beneath httpx's API, what tamesu's rest target runs on), so what tamesu's
engine adds over the same wire code can be read apart from the wire; or a bare aiohttp loop (a `ClientSession` per
conversation: the floor of issue 28's goals).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import uuid

import httpx


async def conversation(url: str, turns: int, context: ssl.SSLContext, transport: str) -> int:
    session = uuid.uuid4().hex
    ok = 0
    if transport == "aiohttp":
        return await aiohttp_conversation(url, turns, context)
    if transport == "tamesu":
        from tamesu.net.aio import aio_transport

        client = httpx.AsyncClient(timeout=60, transport=aio_transport(httpx))
    else:
        client = httpx.AsyncClient(timeout=60, verify=context)
    async with client:
        for turn in range(turns):
            answer = await client.post(url, json={"message": f"step {turn + 1}", "session_id": session})
            ok += answer.status_code == 200 and "echo" in answer.json()["text"]
    return ok


async def aiohttp_conversation(url: str, turns: int, context: ssl.SSLContext) -> int:
    import aiohttp

    session = uuid.uuid4().hex
    ok = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context),
                                     timeout=aiohttp.ClientTimeout(total=60)) as client:
        for turn in range(turns):
            async with client.post(url, json={"message": f"step {turn + 1}", "session_id": session}) as answer:
                ok += answer.status == 200 and "echo" in (await answer.json())["text"]
    return ok


async def main(url: str, conversations: int, turns: int, concurrency: int, transport: str) -> None:
    slots = asyncio.Semaphore(concurrency)
    context = ssl.create_default_context()

    async def one() -> int:
        async with slots:
            return await conversation(url, turns, context, transport)

    done = await asyncio.gather(*(one() for _ in range(conversations)))
    print(sum(done))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                     sys.argv[5] if len(sys.argv) > 5 else "httpx"))
