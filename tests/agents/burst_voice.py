"""A `voice` websocket agent (binary pcm16 16 kHz, no control messages) that does not pace its audio, as a
newcomer's bot often does not: on `/burst` its greeting is one binary message and its answer, once the caller
has spoken and fallen quiet for 0.5 s, is every 20 ms frame sent at once. On `/paced` it greets in 20 ms frames
sent every 20 ms, as a phone network would: read at 8 kHz, that is a steady stream at twice real time. On `/flood`
it never stops sending its greeting, as fast as the socket takes it; on `/endless` it never stops saying it, in
real time (a talker who never stops, no flood). On `/line` it is a phone bridge: 20 ms frames every 20 ms for the
whole call, digital silence whenever it is not speaking, and its answer `LINE_DELAY_S` after it heard the caller
stop (0.5 s of quiet). On `/listens` it is `/burst` without its greeting: it waits for the caller. On `/menu`
(made with `menu=True`) it says a phone menu in three utterances, each one message, `MENU_PAUSE_S` of silence
apart. Its speech is tamesu's own text-to-speech (the voice extra), made once when the agent starts."""

from __future__ import annotations

import asyncio
import contextlib

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from agents.end_of_speech import EndOfSpeech
from agents.ws_thread import ThreadedWebsocketServer

RATE = 16000
FRAME = 640
"""20 ms of 16 kHz pcm16."""
GREETING = "Welcome to the bakery. How can I help you?"
LINE_DELAY_S = 0.8
"""`/line`: the silence it streams between hearing the caller stop and answering."""
ANSWER = "We open at nine in the morning."
TALKED_OVER_WITHIN_S = 18.0
"""`/stops`: how long its first answer goes on (ANSWER again and again) while the caller has not talked over it."""
MENU = ("Thank you for calling the clinic.", "Press 1 for appointments, 2 for billing.", "Or stay on the line.")
MENU_PAUSE_S = 5.0
TALKS_ON_S = 2.0
"""`/stops?after_ms=-1`: how long its first answer goes on over the caller's words, at least."""


async def _speech(text: str) -> bytes:
    from tamesu.audio import tts

    clip, _voice = await tts.say(text)
    return clip.at(RATE).samples.astype("<i2").tobytes()


class BurstVoiceAgent(ThreadedWebsocketServer):
    def __init__(self, menu: bool = False) -> None:
        self.connections = 0
        self.menu: list[bytes] | None = [] if menu else None
        self.stops: list[float] = []
        """`/stops`: how long after the caller's first loud frame it stopped talking (ms, its own clock)."""
        self.greeting = self.answer = b""
        super().__init__("burst-voice-agent", start_timeout=60)  # its speech is made first

    async def _prepare(self) -> None:
        self.greeting, self.answer = await _speech(GREETING), await _speech(ANSWER)
        if self.menu is not None:
            self.menu = [await _speech(said) for said in MENU]

    async def _handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        path = ws.request.path if ws.request is not None else ""
        try:
            if path == "/line":
                await self._line(ws)
                return
            if path.startswith("/stops"):  # `/stops?after_ms=N`: a caller talking over its answer stops it
                await self._stops(ws, int(path.partition("after_ms=")[2] or -1))
                return
            if path == "/menu" and self.menu:
                await self._menu(ws, self.menu)
                return
            if path == "/hum":  # a faint hum at real-time pace, never speech: audio came, nothing was said
                await self._line(ws, hum=True)
                return
            if path == "/flood":  # its greeting again and again, as fast as the socket takes it, never ending
                while True:
                    await ws.send(self.greeting)
            if path in ("/paced", "/endless"):
                start = asyncio.get_running_loop().time()
                said = self.greeting * (1 if path == "/paced" else 1000)  # 1000: longer than any test waits
                for n, k in enumerate(range(0, len(said), FRAME)):
                    await ws.send(said[k:k + FRAME])
                    # on a clock, as a phone network paces: a loaded machine does not slow the stream down
                    await asyncio.sleep(max(0.0, start + (n + 1) * 0.02 - asyncio.get_running_loop().time()))
                async for _message in ws:  # read on, or the caller's frames pile up and its close goes unseen
                    pass
                return
            if path != "/listens":  # `/listens` waits for the caller, who speaks first
                await ws.send(self.greeting)  # the whole greeting in one message
            caller = EndOfSpeech(quiet_frames=25)
            async for message in ws:
                if not isinstance(message, bytes):
                    continue
                if caller.heard(message):
                    for k in range(0, len(self.answer), FRAME):  # every frame at once: a burst
                        await ws.send(self.answer[k:k + FRAME])
        except ConnectionClosed:
            pass

    async def _line(self, ws: ServerConnection, hum: bool = False) -> None:
        """A call's frames on a clock, silence between the greeting and the answer (`/line`); with `hum`, a
        faint tone and nothing else (`/hum`)."""
        import numpy as np

        loop = asyncio.get_running_loop()
        quiet = bytes(FRAME) if not hum else \
            (np.sin(2 * np.pi * 100 * np.arange(FRAME // 2) / RATE) * 100).astype("<i2").tobytes()
        queued = [] if hum else [self.greeting[k:k + FRAME] for k in range(0, len(self.greeting), FRAME)]
        answer_at: list[float] = []
        caller = EndOfSpeech(quiet_frames=25)

        async def listen() -> None:
            with contextlib.suppress(ConnectionClosed):
                async for message in ws:
                    if isinstance(message, bytes) and caller.heard(message):
                        answer_at.append(loop.time() + LINE_DELAY_S)

        listening = asyncio.create_task(listen())
        try:
            start = loop.time()
            for n in range(60_000):  # 20 minutes of frames at most
                if not hum and not queued and answer_at and loop.time() >= answer_at[0]:
                    answer_at.pop(0)
                    queued = [self.answer[k:k + FRAME] for k in range(0, len(self.answer), FRAME)]
                await ws.send(queued.pop(0) if queued else quiet)
                await asyncio.sleep(max(0.0, start + (n + 1) * 0.02 - loop.time()))
        finally:
            listening.cancel()

    async def _menu(self, ws: ServerConnection, menu: list[bytes]) -> None:
        """`/menu`: each utterance in one message, on a clock: the next `MENU_PAUSE_S` after the last one's audio."""
        loop = asyncio.get_running_loop()
        at = loop.time()
        for said in menu:
            await asyncio.sleep(max(0.0, at - loop.time()))
            await ws.send(said)
            at += len(said) / 2 / RATE + MENU_PAUSE_S
        async for _message in ws:  # read on: the caller's frames, its close
            pass

    async def _stops(self, ws: ServerConnection, after_ms: int) -> None:
        """`/stops?after_ms=N`: greets, answers each utterance 0.3 s after it ended with a long answer (four
        times ANSWER) on a clock, and stops it N ms after the caller's first loud frame over it, saying nothing
        of it (no control message); N < 0: never stops, and answers an utterance that came while it talked 0.3 s
        after it has finished talking. Its stops go to `self.stops` (ms after that frame). Its first answer,
        the one a caller talks over, goes on until that caller does (`TALKED_OVER_WITHIN_S`) and, never
        stopping, talks on `TALKS_ON_S` over the caller's words: a loaded tamesu's barge-in, its words
        synthesised when it decides, came after the four ANSWERs had ended (the agent never talked over)."""
        loop = asyncio.get_running_loop()
        queued = [self.greeting[k:k + FRAME] for k in range(0, len(self.greeting), FRAME)]
        long_answer = self.answer * 4
        answer_at: list[float] = []
        # talked_over: the caller's first loud frame over an answer, until it stopped; first_over: over the first
        state: dict[str, float | None] = {"talked_over": None, "first_over": None, "first_from": None}
        spoke_until = 0.0
        caller = EndOfSpeech(quiet_frames=25)

        async def listen() -> None:
            with contextlib.suppress(ConnectionClosed):
                async for message in ws:
                    if not isinstance(message, bytes):
                        continue
                    if caller.heard(message):
                        answer_at.append(loop.time() + 0.3)
                    elif caller.loud and queued and state["first_from"] is not None and state["first_over"] is None:
                        state["first_over"] = loop.time()
                        if after_ms >= 0:
                            state["talked_over"] = state["first_over"]
                    elif caller.loud and queued and state["talked_over"] is None and after_ms >= 0:
                        state["talked_over"] = loop.time()

        listening = asyncio.create_task(listen())
        try:
            start = loop.time()
            for n in range(60_000):
                now = loop.time()
                over = state["talked_over"]
                if over is not None and now >= over + after_ms / 1000:
                    self.stops.append(round((now - over) * 1000, 1))
                    queued.clear()
                    state["talked_over"] = None
                if not queued and answer_at and now >= max(answer_at[0], spoke_until):
                    answer_at.pop(0)
                    queued = [long_answer[k:k + FRAME] for k in range(0, len(long_answer), FRAME)]
                    if state["first_from"] is None:
                        state["first_from"] = now
                first_from, first_over = state["first_from"], state["first_over"]
                if len(queued) == 1 and first_from is not None and (
                        (first_over is None and now < first_from + TALKED_OVER_WITHIN_S)
                        or (after_ms < 0 and first_over is not None and now < first_over + TALKS_ON_S)):
                    queued += [self.answer[k:k + FRAME] for k in range(0, len(self.answer), FRAME)]
                if queued:
                    await ws.send(queued.pop(0))
                    spoke_until = now + 0.3  # a pause between its answers, as every agent makes
                else:
                    await ws.send(bytes(FRAME))
                await asyncio.sleep(max(0.0, start + (n + 1) * 0.02 - loop.time()))
        finally:
            listening.cancel()
