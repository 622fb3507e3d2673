"""A cheap Pipecat bot for the voice benchmark: the protobuf frame wire with RTVI (tamesu.pipecat.v1), a greeting
and an answer to every utterance with the same 3 s of speech (synthesised once at start) in 20 ms frames at
real-time pace, its text in `bot-output` and a fixed transcript of the caller, so the CPU the benchmark sees in
tamesu is tamesu's, not a bot's speech recognition. Prints `listening on ws://...`."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tamesu._proto.pipecat.v1 import frames_pb2
from tamesu.audio import tts
from tamesu.audio.formats import AudioFormat

REPLY = "Thank you. Your table for two is booked for Friday at seven."
RATE = 16000
FRAME_BYTES = RATE * 2 // 50
QUIET_FRAMES = 25
"""Half a second of quiet after loud frames is the end of an utterance."""


def rtvi(kind: str, data: object = None) -> bytes:
    frame = frames_pb2.Frame()
    frame.message.data = json.dumps({"label": "rtvi-ai", "type": kind, "id": "b", "data": data})
    return frame.SerializeToString()


async def main() -> None:
    spoken, _ = await tts.say(REPLY, "espeak:en-us" if tts.voices.find("espeak:en-us") else None)
    wire = spoken.wire(AudioFormat("pcm16", RATE))
    frames = []
    for i in range(0, len(wire), FRAME_BYTES):
        frame = frames_pb2.Frame()
        frame.audio.audio, frame.audio.sample_rate, frame.audio.num_channels = wire[i:i + FRAME_BYTES], RATE, 1
        frames.append(frame.SerializeToString())

    async def handler(ws: ServerConnection) -> None:
        segment = 0

        async def speak() -> None:
            nonlocal segment
            segment += 1
            await ws.send(rtvi("bot-started-speaking"))
            start = time.monotonic()
            for k, frame in enumerate(frames):
                await ws.send(frame)
                delay = start + k * 0.02 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await ws.send(rtvi("bot-output", {"text": REPLY, "segment_id": segment, "will_be_spoken": True,
                                              "spoken_status": "completed"}))
            await ws.send(rtvi("bot-stopped-speaking"))

        loud = quiet = 0
        talking: asyncio.Task[None] | None = None
        try:
            async for message in ws:
                frame = frames_pb2.Frame.FromString(message)  # type: ignore[arg-type]
                if frame.WhichOneof("frame") == "message":
                    if json.loads(frame.message.data).get("type") == "client-ready":
                        await ws.send(rtvi("bot-ready", {"version": "2.2.0"}))
                        talking = asyncio.create_task(speak())
                    continue
                samples = np.frombuffer(frame.audio.audio, "<i2")
                loud, quiet = (loud + 1, 0) if samples.size and np.abs(samples).max() > 500 else (loud, quiet + 1)
                if loud > 10 and quiet == QUIET_FRAMES and (talking is None or talking.done()):
                    loud = 0
                    await ws.send(rtvi("user-input", {"text": "I would like a table", "input_type": "transcription",
                                                      "final": True}))
                    talking = asyncio.create_task(speak())
        except ConnectionClosed:
            pass
        finally:
            if talking is not None:
                talking.cancel()

    async with serve(handler, "127.0.0.1", 0, ping_interval=None, max_size=2**24) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening on ws://127.0.0.1:{port}/ws", flush=True)
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
