"""A phone IVR agent on Debian's baresip, for the sip target's example suites and tests.

    python examples/phone-agent/agent.py [--sip-port 0] [--mode answer|busy|silent|no-answer|drop] [--ring-ms 0]
                                         [--greeting TEXT] [--pause-s 1.8] [--heard DIR] [--prompt-cache DIR]
                                         [--reply-delay-ms MS [--reply-pause-ms MS] [--clock-file PATH]
                                          [--hang-up-after-reply] [--stop-delay-ms MS]]

baresip is the SIP peer (it answers, plays audio files, reports DTMF, transfers, hangs up); this script writes
its configuration, starts it, and drives it over its control socket as a small IVR:

- on answer it says "Welcome to Acme. Press 2 for billing, or 3 to talk to a person.";
- digit 2: "You chose billing. Your balance is forty two dollars. Goodbye." then it hangs up;
- digit 3: "Transferring you now." then it transfers the call to `sip:billing@127.0.0.1` (a REFER);
- digit 9: it answers with the digits 1234# (DTMF from the agent);
- `--greeting "First words.|Then these."` says another greeting, each `|` a pause of `--pause-s` (1.8 s)
  between two utterances, as an IVR that greets and then reads its menu does;
- `--heard DIR` writes each call's audio to DIR (baresip's sndfile filter; `dump-*-dec.wav` is what it heard);
- `--reply-delay-ms MS` makes it answer speech: when the caller stops talking it waits MS more and says "I can
  book a table for you. For how many people?" (`--reply-pause-ms`: exactly that silence between the two
  sentences), noting on its own clock (clock.py) when it heard the caller stop and when its reply went out,
  one JSON line a reply in `--clock-file`; it needs tamesu's voice toolkit (`tamesu[voice]`) to speak;
  `--hang-up-after-reply`: it hangs up half a second after its reply has played (a caller then need not wait
  out a silence to know the reply is over); `--stop-delay-ms MS`: a caller that talks over its reply is heard, and
  the reply stops MS later, noted on its clock from the caller's first word it heard to the reply's last sound;
- `--mode busy` rejects every call (486: baresip 1.0's hangup takes no status and says `486 Rejected`),
  `no-answer` lets it ring, `silent` answers and says nothing, `drop` hangs up a second into its greeting.

`--prompt-cache DIR` keeps each spoken prompt in DIR and reuses it: agents started one after another (a test
suite's) speak each text once, and start in about a second instead of loading a voice first.

It also takes an HTTP trigger for inbound tests: `POST /call?to=sip:user@host:port` makes the agent call out.
It prints `listening sip:agent@127.0.0.1:PORT trigger http://127.0.0.1:PORT` once ready, and stops with its
parent or on SIGTERM. The prompts are spoken by espeak-ng (Debian's `espeak-ng` package) into WAV files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import wave
from pathlib import Path
from typing import Any

from clock import Clock, reply_wav

PROMPTS = {
    "greeting": "Welcome to Acme. Press 2 for billing, or 3 to talk to a person.",
    "billing": "You chose billing. Your balance is forty two dollars. Goodbye.",
    "transfer": "Transferring you now.",
    "echo": "Here are your digits.",
}
REPLY = "I can book a table for you.|For how many people?"
RATE = 8000
TAIL_S = 60
"""Silence after each prompt: baresip's file source ends the call when its file ends."""


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_sip_port() -> int:
    """A port free for UDP and TCP at once: baresip listens on both."""
    while True:
        port = free_port(socket.SOCK_DGRAM)
        with socket.socket() as tcp:
            try:
                tcp.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def speak(text: str, path: Path, lead_s: float = 0.3, pause_s: float = 1.8) -> float:
    """The words as pcm16 8 kHz with a lead-in and a long silent tail; returns the words' length in s.
    Each `|` in `text` is a pause of `pause_s` between two utterances.
    Spoken by tamesu's voice toolkit (Piper's packaged voice) when `tamesu[voice]` is installed, else by
    Debian's espeak-ng, whose robotic voice a phone line's G.711 makes hard to transcribe."""
    try:
        from tamesu.audio import tts

        gap = bytes(int(pause_s * RATE) * 2)
        parts = []
        for part in text.split("|"):
            clip, _ = asyncio.run(tts.say(part.strip()))  # before the agent's own loop starts
            parts.append(clip.at(RATE).samples.astype("<i2").tobytes())
        words = gap.join(parts)
        spoken_s = len(words) / 2 / RATE
        pcm = bytes(int(lead_s * RATE) * 2) + words + bytes(TAIL_S * RATE * 2)
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(RATE)
            out.writeframes(pcm)
        return spoken_s
    except ImportError:
        pass
    raw = path.with_suffix(".raw.wav")
    text = text.replace("|", f' <break time="{int(pause_s * 1000)}ms"/> ')  # SSML (-m): espeak's own pause
    subprocess.run(["espeak-ng", "-m", "-v", "en-us", "-s", "150", "-w", str(raw), text], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    subprocess.run(["sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(path), "pad", str(lead_s),
                    str(TAIL_S)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    with wave.open(str(raw)) as spoken:
        return spoken.getnframes() / spoken.getframerate()


def speak_once(text: str, path: Path, cache: Path | None, pause_s: float = 1.8) -> float:
    """`speak`, through `cache` when given: a prompt already spoken there (the same text, pause and format) is
    copied instead of spoken again. The voice is not part of the key: one cache serves the agents of one caller,
    which all speak with the same voice."""
    if cache is None:
        return speak(text, path, pause_s=pause_s)
    pause = pause_s if "|" in text else None  # a text of one utterance has no pause
    key = hashlib.sha256(json.dumps([text, pause, RATE, TAIL_S]).encode()).hexdigest()[:24]
    kept, length = cache / f"{key}.wav", cache / f"{key}.json"
    if kept.is_file() and length.is_file():
        shutil.copyfile(kept, path)
        return float(json.loads(length.read_text()))
    spoken_s = speak(text, path, pause_s=pause_s)
    cache.mkdir(parents=True, exist_ok=True)
    # written aside and renamed: an agent starting at the same moment reads a whole file or none
    for source, target in ((path, kept), (None, length)):
        aside = target.with_suffix(f".{os.getpid()}.part")
        if source is None:
            aside.write_text(json.dumps(spoken_s))
        else:
            shutil.copyfile(source, aside)
        aside.replace(target)
    return spoken_s


def silence(path: Path) -> Path:
    """A WAV of nothing but silence, as long as a call may last."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(bytes(TAIL_S * RATE * 2))
    return path


def write_config(folder: Path, sip_port: int, ctrl_port: int, answer: str, source: Path,
                 heard: str | None = None, jitter: str = "5-10") -> None:
    rtp = free_port(socket.SOCK_DGRAM)
    lines = [
        f"sip_listen 127.0.0.1:{sip_port}", "net_interface 127.0.0.1",
        f"audio_source aufile,{source}", "audio_player aufile,/dev/null", "audio_alert aufile,/dev/null",
        f"ausrc_srate {RATE}", f"auplay_srate {RATE}", f"rtp_ports {rtp}-{rtp + 40}",
        "module_path /usr/lib/baresip/modules", "module g711.so", "module aufile.so",
        "module_app account.so", "module_app menu.so", "module_app ctrl_tcp.so",
        f"ctrl_tcp_listen 127.0.0.1:{ctrl_port}", "sip_trans_def udp", f"jitter_buffer_delay {jitter}",
    ]
    if heard:  # baresip's sndfile filter writes each call's audio both ways: dump-*-dec.wav is what it heard
        lines += ["module sndfile.so", f"snd_path {heard}"]
    (folder / "config").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "accounts").write_text(
        f"<sip:agent@127.0.0.1:{sip_port}>;regint=0;answermode={answer};audio_codecs=PCMU,PCMA\n", encoding="utf-8")


class Control:
    """baresip's control socket: netstring-framed JSON commands out, responses and events in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def command(self, name: str, params: str = "") -> None:
        body = json.dumps({"command": name, "params": params, "token": name}).encode()
        self.writer.write(str(len(body)).encode() + b":" + body + b",")
        await self.writer.drain()

    async def next(self) -> dict[str, Any] | None:
        try:
            length = int((await self.reader.readuntil(b":"))[:-1])
            body = await self.reader.readexactly(length + 1)
        except (asyncio.IncompleteReadError, ValueError):
            return None
        return json.loads(body[:-1])


class Ivr:
    def __init__(self, control: Control, prompts: dict[str, Path], lengths: dict[str, float], mode: str,
                 ring_ms: int) -> None:
        self.control, self.prompts, self.lengths = control, prompts, lengths
        self.mode, self.ring_ms = mode, ring_ms
        self.later: set[asyncio.Task[None]] = set()

    def after(self, seconds: float, *commands: tuple[str, str]) -> None:
        async def run() -> None:
            await asyncio.sleep(seconds)
            for name, params in commands:
                await self.control.command(name, params)

        task = asyncio.create_task(run())
        self.later.add(task)
        task.add_done_callback(self.later.discard)

    async def say(self, prompt: str) -> None:
        await self.control.command("ausrc", f"aufile,{self.prompts[prompt]}")

    async def on(self, event: dict[str, Any]) -> None:
        kind, param = event.get("type"), str(event.get("param") or "")
        if kind == "CALL_INCOMING":
            if self.mode == "busy":
                await self.control.command("hangup", "486 Busy Here")
            elif self.mode != "no-answer" and self.ring_ms:
                self.after(self.ring_ms / 1000, ("accept", ""))
        elif kind == "CALL_ESTABLISHED":
            if self.mode != "silent":
                await self.say("greeting")  # the source is baresip's, not the call's: start each call anew
            if self.mode == "drop":
                self.after(1.0, ("hangup", ""))
        elif kind == "CALL_CLOSED" and self.mode == "silent":
            await self.say("silence")  # a reply said on this call would start the next one
        elif kind == "CALL_DTMF_START":
            await self.on_digit(param.strip())

    async def on_digit(self, digit: str) -> None:
        if digit == "2":
            await self.say("billing")
            self.after(0.3 + self.lengths["billing"] + 0.4, ("hangup", ""))
        elif digit == "3":
            await self.say("transfer")
            self.after(0.3 + self.lengths["transfer"] + 0.3, ("transfer", "sip:billing@127.0.0.1"))
        elif digit == "9":
            await self.say("echo")
            self.after(0.3 + self.lengths["echo"], ("sndcode", "1"), ("sndcode", "2"), ("sndcode", "3"),
                       ("sndcode", "4"), ("sndcode", "#"))


async def trigger_server(control: Control, port: int) -> asyncio.Server:
    """`POST /call?to=URI`: the agent calls `URI` (an inbound call for the tester)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode("latin-1").split()
        while (await reader.readline()).strip():
            pass
        target = request[1].split("to=", 1)[1] if len(request) > 1 and "to=" in request[1] else ""
        if target:
            await control.command("dial", target.replace("%3A", ":").replace("%40", "@"))
        status = "202 Accepted" if target else "400 Bad Request"
        writer.write(f"HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def serve(args: argparse.Namespace, folder: Path, prompts: dict[str, Path],
                lengths: dict[str, float]) -> int:
    answer = "auto" if args.mode in ("answer", "silent", "drop") and not args.ring_ms else "manual"
    # ports are picked free, then bound by baresip: another process may take one in between, so try again
    for attempt in range(5):
        sip_port = args.sip_port or free_sip_port()
        ctrl_port = free_port()
        # a silent agent's line starts silent: switching the source after the answer would let words through
        first = prompts["silence"] = silence(folder / "silence.wav") if args.mode == "silent" else prompts["greeting"]
        # an agent that times its hearing hears each packet as it comes: baresip's jitter buffer (5 frames
        # by default) would hold the caller's audio 100 ms before the agent's ears (clock.py) get it
        jitter = "0-0" if args.reply_delay_ms is not None else "5-10"
        write_config(folder, sip_port, ctrl_port, answer, first, args.heard or dumps(args, folder), jitter)
        log = (folder / "baresip.log").open("wb")
        peer = subprocess.Popen(["baresip", "-f", str(folder)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        try:
            control = await _connect(ctrl_port, peer)
            break
        except SystemExit:
            if attempt == 4 or args.sip_port:
                raise
    try:
        ivr = Ivr(control, prompts, lengths, args.mode, args.ring_ms)
        trigger_port = args.trigger_port or free_port()
        server = await trigger_server(control, trigger_port)
        print(f"listening sip:agent@127.0.0.1:{sip_port} trigger http://127.0.0.1:{trigger_port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        events = asyncio.create_task(_events(control, ivr, stop))
        clock = None
        if args.reply_delay_ms is not None:
            def reply() -> None:  # from the clock's thread
                loop.call_soon_threadsafe(lambda: ivr.after(0, ("ausrc", f"aufile,{folder / 'reply.wav'}")))
                if args.hang_up_after_reply:
                    loop.call_soon_threadsafe(lambda: ivr.after(args.reply_s + 0.5, ("hangup", "")))

            stop_reply = None
            if args.stop_delay_ms is not None:
                quiet = silence(folder / "silence.wav")

                def stop_reply() -> None:  # from the clock's thread: the reply talked over ends here
                    loop.call_soon_threadsafe(lambda: ivr.after(0, ("ausrc", f"aufile,{quiet}")))

            clock = Clock(Path(args.heard or dumps(args, folder) or folder),
                          Path(args.clock_file) if args.clock_file else None,
                          args.reply_delay_ms, reply, stop_reply, args.stop_delay_ms or 0.0, args.reply_s)
            clock.start()
        await stop.wait()
        events.cancel()
        if clock is not None:
            clock.stopped.set()
        server.close()
    finally:
        peer.terminate()
        try:
            peer.wait(timeout=3)
        except subprocess.TimeoutExpired:
            peer.kill()
    return 0


def dumps(args: argparse.Namespace, folder: Path) -> str | None:
    """Where baresip writes each call's audio when the agent answers speech: its ears (clock.py)."""
    if args.reply_delay_ms is None:
        return None
    (folder / "dumps").mkdir(exist_ok=True)
    return str(folder / "dumps")


async def _events(control: Control, ivr: Ivr, stop: asyncio.Event) -> None:
    while (event := await control.next()) is not None:
        if event.get("event"):
            print(f"event {event.get('type')} {event.get('param') or ''}".rstrip(), flush=True)
            await ivr.on(event)
    stop.set()  # baresip went away


async def _connect(port: int, peer: subprocess.Popen[bytes]) -> Control:
    for _ in range(100):
        if peer.poll() is not None:
            said = (Path(peer.args[2]) / "baresip.log").read_text(errors="replace").strip().splitlines()
            raise SystemExit(f"phone agent: baresip exited with {peer.returncode}: {' | '.join(said[-3:])}")
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            return Control(reader, writer)
        await asyncio.sleep(0.05)
    raise SystemExit("phone agent: baresip's control socket never opened")


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sip-port", type=int, default=0)
    parser.add_argument("--trigger-port", type=int, default=0)
    parser.add_argument("--mode", choices=["answer", "busy", "silent", "no-answer", "drop"], default="answer")
    parser.add_argument("--ring-ms", type=int, default=0)
    parser.add_argument("--greeting", default=PROMPTS["greeting"], help="what it says on answer; | is a pause")
    parser.add_argument("--pause-s", type=float, default=1.8, help="the pause a | in --greeting makes")
    parser.add_argument("--heard", help="a folder where the agent writes each call's audio (dump-*-dec.wav: heard)")
    parser.add_argument("--reply-delay-ms", type=float, help="answer speech, this much after the caller stops")
    parser.add_argument("--reply-pause-ms", type=float, default=400, help="the silence between the reply's sentences")
    parser.add_argument("--clock-file", help="where the agent notes its own time to first audio (JSON lines)")
    parser.add_argument("--hang-up-after-reply", action="store_true", help="hang up once a reply has played")
    parser.add_argument("--stop-delay-ms", type=float,
                        help="with --reply-delay-ms: stop a reply the caller talks over, this much after hearing it")
    parser.add_argument("--prompt-cache", type=Path, help="keep the spoken prompts here and reuse them")
    args = parser.parse_args()
    _die_with_parent_self()
    for tool in ("baresip", "espeak-ng", "sox"):
        if shutil.which(tool) is None:
            print(f"phone agent: {tool} is not installed (Debian packages baresip-core, espeak-ng, sox)",
                  file=sys.stderr)
            return 3
    with tempfile.TemporaryDirectory(prefix="tamesu-phone-agent-") as temporary:
        folder = Path(temporary)
        prompts = {name: folder / f"{name}.wav" for name in PROMPTS}
        said = {**PROMPTS, "greeting": args.greeting}
        lengths = {name: speak_once(text, prompts[name], args.prompt_cache, pause_s=args.pause_s)
                   for name, text in said.items()}
        if args.reply_delay_ms is not None:
            args.reply_s = reply_wav(REPLY, folder / "reply.wav", args.reply_pause_ms, TAIL_S, args.prompt_cache)
        _speech_done()
        return asyncio.run(serve(args, folder, prompts, lengths))


def _speech_done() -> None:
    """Every prompt is spoken: the speech worker that spoke them (Piper loaded) is not needed again. It ends, or goes
    back warm to the keeper it was borrowed from (`TAMESU_SPEECH_KEEPER`), for the next run that asks (a test's
    `tamesu run` beside the agent); held for the agent's life, that run started a worker of its own and loaded Piper."""
    with contextlib.suppress(ImportError):  # spoken by espeak-ng: no worker
        from tamesu.audio import pool

        pool.shutdown()


def _die_with_parent_self() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
