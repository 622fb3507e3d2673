"""The pipecat bot's warm-up call (tests/agents/voice_bot.py `warm`): it returns on the first audio of a greeting
and gives up, with a clear error, on a line that never speaks. Against a websocket line of the tests' own that
speaks Twilio's media stream protocol, so no bot or model is needed."""

from __future__ import annotations

import json

import pytest
from websockets.asyncio.server import ServerConnection

from agents.voice_bot import warm
from agents.ws_thread import ThreadedWebsocketServer


class Line(ThreadedWebsocketServer):
    """Reads Twilio's `connected` and `start`, then greets with one media message (or stays silent)."""

    def __init__(self, *, greets: bool) -> None:
        self.greets = greets
        self.heard: list[str] = []
        super().__init__("warm-line")

    async def _handler(self, ws: ServerConnection) -> None:
        for _ in range(2):
            self.heard.append(json.loads(await ws.recv())["event"])
        if self.greets:
            await ws.send(json.dumps({"event": "mark", "mark": {"name": "before the audio"}}))
            await ws.send(json.dumps({"event": "media", "media": {"payload": "f39/fw=="}}))
        await ws.wait_closed()  # the caller hangs up


@pytest.mark.parametrize("greets", [True, False])
def test_the_warm_up_call_waits_for_the_greetings_audio(greets: bool) -> None:
    line = Line(greets=greets)
    try:
        if greets:
            warm(line.url, timeout=60)
        else:
            with pytest.raises(TimeoutError, match="no audio within 1 s"):
                warm(line.url, timeout=1)
        assert line.heard == ["connected", "start"]
    finally:
        line.stop()
