"""A cheap Realtime server for the voice benchmark: it answers every committed utterance with the same 3 s
of speech (synthesised once at start) at real-time pace and a fixed transcript, so the CPU the benchmark
sees in tamesu is tamesu's, not an agent's speech recognition. Prints `listening on ws://...`."""

from __future__ import annotations

import asyncio
import base64
import json
import time

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tamesu.audio import tts
from tamesu.audio.formats import AudioFormat

REPLY = "Thank you. Your table for two is booked for Friday at seven."
CHUNK_MS = 100


async def main() -> None:
    spoken, _ = await tts.say(REPLY, "espeak:en-us" if tts.voices.find("espeak:en-us") else None)
    wire = spoken.wire(AudioFormat("pcm16", 24000))
    size = AudioFormat("pcm16", 24000).frame_bytes(CHUNK_MS)
    chunks = [base64.b64encode(wire[i:i + size]).decode() for i in range(0, len(wire), size)]

    async def handler(ws: ServerConnection) -> None:
        n = 0

        async def emit(event: dict) -> None:
            nonlocal n
            n += 1
            await ws.send(json.dumps({"event_id": f"e{n}", **event}))

        await emit({"type": "session.created", "session": {"type": "realtime"}})
        try:
            async for message in ws:
                event = json.loads(message)
                kind = event.get("type")
                if kind == "session.update":
                    await emit({"type": "session.updated", "session": event.get("session", {})})
                elif kind == "input_audio_buffer.commit":
                    await emit({"type": "input_audio_buffer.committed", "item_id": "item_u"})
                    await emit({"type": "conversation.item.input_audio_transcription.completed",
                                "item_id": "item_u", "content_index": 0, "transcript": "I would like a table"})
                elif kind == "response.create":
                    where = {"response_id": f"r{n}", "item_id": f"i{n}", "output_index": 0, "content_index": 0}
                    await emit({"type": "response.created", "response": {"id": where["response_id"]}})
                    start = time.monotonic()
                    for k, chunk in enumerate(chunks):
                        if k == 0:
                            await emit({"type": "response.output_audio_transcript.delta", **where, "delta": REPLY})
                        await emit({"type": "response.output_audio.delta", **where, "delta": chunk})
                        delay = start + (k + 1) * CHUNK_MS / 1000 - CHUNK_MS / 1000 - time.monotonic()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    await emit({"type": "response.done", "response": {"id": where["response_id"],
                                                                      "status": "completed"}})
        except ConnectionClosed:
            pass

    async with serve(handler, "127.0.0.1", 0, ping_interval=None, max_size=2**24) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening on ws://127.0.0.1:{port}/v1/realtime", flush=True)
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
