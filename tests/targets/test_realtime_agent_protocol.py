"""The reference Realtime agent is honest about the protocol: the official `openai` SDK's realtime client
talks to it, and every event it sends validates against the SDK's own server-event models, with no key the
models do not know, anywhere in the event."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from pydantic import BaseModel

from agents.voice import needs_voice, realtime_agent  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.audio, needs_voice]


def _unknown_keys(value: Any, where: str = "") -> list[str]:
    """Keys an SDK model kept as extras (openai's models allow them), i.e. fields the protocol lacks."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        found += [f"{where}.{key}" for key in (value.model_extra or {})]
        for name in type(value).model_fields:
            found += _unknown_keys(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _unknown_keys(item, f"{where}[{i}]")
    return found


class Validator:
    def __init__(self) -> None:
        from openai.types.realtime import RealtimeServerEvent
        from pydantic import TypeAdapter

        self.adapter = TypeAdapter(RealtimeServerEvent)
        self.events: list[dict[str, Any]] = []
        self.failures: list[str] = []

    def check(self, raw: bytes | str) -> dict[str, Any]:
        data = json.loads(raw)
        self.events.append(data)
        try:
            model = self.adapter.validate_python(data)
        except Exception as exc:
            self.failures.append(f"{data.get('type')}: {exc}")
            return data
        extra = _unknown_keys(model)
        if extra:
            self.failures.append(f"{data.get('type')}: unknown keys {extra}")
        return data


async def _until(connection: Any, validator: Validator, kind: str, limit: int = 2000) -> list[dict[str, Any]]:
    seen = []
    for _ in range(limit):
        event = validator.check(await connection.recv_bytes())
        seen.append(event)
        if event["type"] == kind:
            return seen
    raise AssertionError(f"no {kind} in {len(seen)} events")


async def test_the_sdk_client_meets_every_event_with_its_own_models(realtime_agent: str) -> None:  # noqa: F811
    from openai import AsyncOpenAI

    from tamesu.audio import tts
    from tamesu.audio.formats import AudioFormat

    base = realtime_agent.removesuffix("/realtime")
    client = AsyncOpenAI(api_key="sk-local", websocket_base_url=base)
    check = Validator()
    async with client.realtime.connect(model="bella-scripted-1") as connection:
        await _until(connection, check, "session.created")
        # text: a question, then a function call answered by the client
        await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        await _until(connection, check, "session.updated")
        await connection.conversation.item.create(item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "A table for two on Friday, please"}]})
        await connection.response.create()
        events = await _until(connection, check, "response.done")
        call = next(e for e in events if e["type"] == "response.function_call_arguments.done")
        assert call["name"] == "check_availability"
        assert json.loads(call["arguments"]) == {"party_size": 2, "day": "friday"}
        await connection.conversation.item.create(item={
            "type": "function_call_output", "call_id": call["call_id"],
            "output": json.dumps({"available": True, "time": "7 pm"})})
        await connection.response.create()
        events = await _until(connection, check, "response.done")
        text = next(e for e in events if e["type"] == "response.output_text.done")["text"]
        assert "7 pm" in text

        # audio: appended, committed, answered with audio and its transcript
        await connection.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
        await _until(connection, check, "session.updated")
        spoken, _voice = await tts.say("What is on the menu tonight?")
        wire = spoken.wire(AudioFormat("pcm16", 24000))
        for i in range(0, len(wire), 4800):
            await connection.input_audio_buffer.append(audio=base64.b64encode(wire[i:i + 4800]).decode())
        await connection.input_audio_buffer.commit()
        await connection.response.create()
        events = await _until(connection, check, "response.output_audio_transcript.delta")
        heard = next(e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed")
        assert "menu" in heard["transcript"].lower()
        # barge in: cancel, then truncate what was heard
        await connection.response.cancel()
        events = await _until(connection, check, "response.done")
        assert events[-1]["response"]["status"] == "cancelled"
        item_id = events[-1]["response"]["output"][0]["id"]
        await connection.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=300)
        truncated = (await _until(connection, check, "conversation.item.truncated"))[-1]
        assert truncated["audio_end_ms"] == 300

        # server VAD: the agent decides when the user has finished
        await connection.session.update(session={"type": "realtime", "audio": {"input": {
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 400}}}})
        await _until(connection, check, "session.updated")
        spoken, _voice = await tts.say("Goodbye")
        wire = spoken.padded(300, 900).wire(AudioFormat("pcm16", 24000))
        for i in range(0, len(wire), 4800):
            await connection.input_audio_buffer.append(audio=base64.b64encode(wire[i:i + 4800]).decode())
        events = await _until(connection, check, "response.done")
        kinds = [e["type"] for e in events]
        assert kinds.index("input_audio_buffer.speech_started") < kinds.index("input_audio_buffer.speech_stopped")
        assert any(e["type"] == "response.function_call_arguments.done" and e["name"] == "end_call" for e in events)

        # a mistake gets an error event, not a closed socket
        await connection.send({"type": "no.such.event"})  # type: ignore[arg-type]
        error = (await _until(connection, check, "error"))[-1]
        assert error["error"]["code"] == "unknown_event"
    kinds = {e["type"] for e in check.events}
    assert check.failures == [], "\n".join(check.failures)
    assert len(check.events) > 60
    for kind in ("response.output_audio.delta", "response.output_audio_transcript.delta", "response.output_text.delta",
                 "conversation.item.truncated", "input_audio_buffer.committed", "response.content_part.added"):
        assert kind in kinds


async def _g711_call(realtime_agent: str, fmt: str) -> tuple[bytes, list[str]]:  # noqa: F811
    """One call in a G.711 session (`fmt`): the reply's audio as it came on the wire, and what the validator
    found wrong in the agent's events."""
    from openai import AsyncOpenAI

    from tamesu.audio import tts
    from tamesu.audio.formats import AudioFormat

    wire_format = AudioFormat("mulaw" if fmt == "audio/pcmu" else "alaw", 8000)
    client = AsyncOpenAI(api_key="sk-local", websocket_base_url=realtime_agent.removesuffix("/realtime"))
    check = Validator()
    async with client.realtime.connect(model="bella-scripted-1") as connection:
        await _until(connection, check, "session.created")
        await connection.session.update(session={"type": "realtime", "output_modalities": ["audio"], "audio": {
            "input": {"format": {"type": fmt}}, "output": {"format": {"type": fmt}}}})
        await _until(connection, check, "session.updated")
        spoken, _voice = await tts.say("I would like to book a table")
        await connection.input_audio_buffer.append(audio=base64.b64encode(spoken.wire(wire_format)).decode())
        await connection.input_audio_buffer.commit()
        await connection.response.create()
        events = await _until(connection, check, "response.done")
    return b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta"), \
        check.failures


async def test_g711_audio_both_ways(realtime_agent: str) -> None:  # noqa: F811
    """With a G.711 session the agent hears 8 kHz mu-law/A-law and answers in it: the reply decodes into
    speech that tamesu's speech-to-text understands. The two laws' calls at once (nothing in them is timed;
    one after the other, mostly the replies played at real-time pace, they were 12.3 s of the audio lane, 8.6 s
    at once)."""
    from tamesu.audio import stt
    from tamesu.audio.clip import Clip
    from tamesu.audio.formats import AudioFormat

    laws = {"audio/pcmu": "mulaw", "audio/pcma": "alaw"}
    calls = await asyncio.gather(*(_g711_call(realtime_agent, fmt) for fmt in laws))
    for (fmt, law), (audio, failures) in zip(laws.items(), calls, strict=True):
        heard = stt.transcribe(Clip.from_wire(audio, AudioFormat(law, 8000))).text.lower()
        assert "how many people" in heard, (fmt, heard)
        assert failures == [], (fmt, failures)
