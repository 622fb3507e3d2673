"""The gRPC baseline: the same conversations tamesu's grpc target runs, sent with a bare grpc.aio client of the
turn API and nothing else (one Converse stream per conversation, reading each turn's events to its end).

    python bench/grpc_baseline_client.py URL TOKEN CONVERSATIONS TURNS CONCURRENCY
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import grpc

from tamesu._proto.turn.v1 import turn_pb2, turn_pb2_grpc

ENDS = {"turn_end", "handoff", "session_end", "error"}


async def conversation(target: str, token: str, turns: int) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        call = turn_pb2_grpc.TurnServiceStub(channel).Converse(metadata=(("authorization", f"Bearer {token}"),))
        session = uuid.uuid4().hex
        answered = 0
        for turn in range(1, turns + 1):
            await call.write(turn_pb2.UserTurn(session_id=session, turn=turn, text=f"step {turn}"))
            text = []
            while True:
                event = await asyncio.wait_for(call.read(), 30)
                if event is grpc.aio.EOF:
                    raise SystemExit("the agent closed the stream")
                kind = event.WhichOneof("event")
                if kind == "delta":
                    text.append(event.delta.text)
                if kind in ENDS:
                    break
            answered += 1
        await call.done_writing()
        call.cancel()
    return answered


async def main(url: str, token: str, conversations: int, turns: int, concurrency: int) -> None:
    target = url.removeprefix("grpc://")
    slots = asyncio.Semaphore(concurrency)

    async def one() -> int:
        async with slots:
            return await conversation(target, token, turns)

    print(sum(await asyncio.gather(*(one() for _ in range(conversations)))))


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], int(args[2]), int(args[3]), int(args[4])))
