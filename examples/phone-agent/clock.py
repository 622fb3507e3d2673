"""The phone agent's ears and its own clock: it hears the caller, answers after an injected delay, and notes when.

baresip's sndfile filter writes each call's audio both ways as it passes, one 20 ms frame per write:
`dump-*-dec.wav` as each frame the agent heard is decoded, `dump-*-enc.wav` as each frame it says is encoded
(then sent at once). `Clock` watches both files from a thread of its own (a look every 2 ms), so the moment a
frame shows up is the moment the agent heard or sent it (frames found together at one look, the thread having
been held, are dated back a frame apart):

- the caller's speech ends `END_MS` after its last voiced frame (the agent's end-of-speech detection); the
  agent then waits `--reply-delay-ms` more and starts its reply (`reply` asks the IVR to play it);
- it notes `{"call": N, "first_audio_ms": MS}`: from the caller's last voiced frame as it heard it to the first
  frame of its reply with a voiced sample as it went out, plus that sample's place in the frame;
- with a `stop` callback (`--stop-delay-ms`): a caller's voiced frame heard while a reply plays is a barge-in; the
  agent stops the reply `stop_delay_ms` after it (`stop` switches its source to silence) and notes
  `{"call": N, "stop": K, "stop_ms": MS}`: from that caller frame as it heard it to the last frame of the reply with
  a sound (a sample beyond the line's silence) as it went out, written again as it grows;
- and `{"call": N, "reply": K, "silence_ms": MS}`: the longest silence of reply K so far (written again each time
  it grows: the last line of a reply is its longest): the wait from that caller frame to the reply's first
  voiced sample, or a pause between two voiced samples of the reply, each sample at its place in its frame.

One JSON line each, in the file `--clock-file` names; N counts the agent's calls from 1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

FRAME = 320
"""20 ms of pcm16 at 8 kHz: what baresip's filter writes at once."""
RATE = 8000
HEADER = 44
LINE_SILENCE = 8
"""A caller frame with no sample louder than this is the open line's silence (A-law's silence decodes to 8)."""
VOICED = 300
"""A sample of the reply louder than this (about -41 dBFS) is voiced (the other reference agents' threshold)."""
END_MS = 600
"""Silence after the caller's last voiced frame that ends its utterance for the agent."""
LOOK_S = 0.002


class Clock(threading.Thread):
    def __init__(self, folder: Path, log: Path | None, delay_ms: float, reply: Callable[[], None],
                 stop: Callable[[], None] | None = None, stop_delay_ms: float = 0.0, reply_s: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.folder, self.log, self.delay_ms, self.reply = folder, log, delay_ms, reply
        self.stop, self.stop_delay_ms, self.reply_s = stop, stop_delay_ms, reply_s
        self.stopped = threading.Event()
        self.calls = 0

    def _note(self, **note: object) -> None:
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"call": self.calls, **note}) + "\n")

    def _newest(self) -> Path | None:
        dumps = sorted(self.folder.glob("dump-*-dec.wav"))  # named by the second the call started
        return dumps[-1] if dumps else None

    def run(self) -> None:
        watched: Path | None = None
        while not self.stopped.is_set():
            dec = self._newest()
            enc = dec.with_name(dec.name.replace("-dec.wav", "-enc.wav")) if dec is not None else None
            if dec is not None and enc is not None and dec != watched and enc.exists():
                watched = dec
                self.calls += 1
                self._watch(dec, enc)
            else:
                time.sleep(0.05)

    def _watch(self, dec: Path, enc: Path) -> None:
        """One call, until the next call's dumps appear or the agent stops."""
        heard, said = Tail(dec), Tail(enc)
        try:
            self._hear_and_answer(dec, heard, said)
        finally:
            heard.file.close()
            said.file.close()

    def _hear_and_answer(self, dec: Path, heard: Tail, said: Tail) -> None:
        voiced_at: float | None = None
        """When the caller's last voiced frame was heard; None until it speaks, and once the reply is due."""
        quiet_from: float | None = None
        """Where the reply's current silence started: that caller frame, then the reply's last voiced sample."""
        replying = False
        replies, longest = 0, 0.0
        due: float | None = None
        asked = False
        reply_from: float | None = None
        """When the reply being said went out: it plays `reply_s` from then, and a caller may talk over it."""
        barge: float | None = None
        """When the caller's first frame over the reply was heard (until the next reply)."""
        stop_due: float | None = None
        stops = 0
        looked = time.monotonic()
        while not self.stopped.is_set():
            now = time.monotonic()
            for at, frame in heard.frames(now):
                if int(np.abs(frame.astype(np.int32)).max()) > LINE_SILENCE:
                    if (self.stop is not None and barge is None and reply_from is not None
                            and at < reply_from + self.reply_s):
                        barge, stops = at, stops + 1  # talked over
                        stop_due = at + self.stop_delay_ms / 1000
                    voiced_at = quiet_from = at
                    replying, due, asked, reply_from = False, None, False, None
            if voiced_at is not None and not asked and now - voiced_at >= END_MS / 1000:
                due = voiced_at + (END_MS + self.delay_ms) / 1000
            if due is not None and now >= due:
                due, asked = None, True  # once for this utterance
                self.reply()
            if stop_due is not None and self.stop is not None and now >= stop_due:
                stop_due = None
                self.stop()
            for at, frame in said.frames(now):
                if barge is not None and not asked:  # the reply talked over, going on until the agent stops it
                    if int(np.abs(frame.astype(np.int32)).max()) > LINE_SILENCE:
                        # its last sound after the caller's first word: written again as it grows
                        self._note(stop=stops, stop_ms=round((at - barge) * 1000, 3))
                    continue
                loud = np.flatnonzero(np.abs(frame.astype(np.int32)) > VOICED)
                if quiet_from is None or not loud.size:
                    continue
                if not replying:
                    replying, replies, longest = True, replies + 1, 0.0
                    reply_from, barge = at, None
                    out_at = at + loud[0] / RATE
                    if voiced_at is not None:
                        self._note(first_audio_ms=round((out_at - voiced_at) * 1000, 3), heard_at=voiced_at,
                                   out_at=out_at)
                    voiced_at = None
                silence = (at + loud[0] / RATE - quiet_from) * 1000
                if silence > longest:
                    longest = silence
                    self._note(reply=replies, silence_ms=round(silence, 3))
                quiet_from = at + (loud[-1] + 1) / RATE
            if now - looked > 0.1:
                looked = now
                if self._newest() != dec:
                    return
            time.sleep(LOOK_S)


class Tail:
    """The frames a growing WAV file gained since the last look."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("rb")
        self.file.seek(HEADER)
        self.rest = b""

    def frames(self, now: float) -> list[tuple[float, np.ndarray]]:
        """Each new frame with when it was written: the last just now, those before it a frame apart (baresip
        writes one every 20 ms; several at a look mean this thread was held, not that they came together)."""
        data = self.rest + self.file.read()
        whole = len(data) - len(data) % FRAME
        self.rest = data[whole:]
        count = whole // FRAME
        return [(now - (count - 1 - k) * FRAME / 2 / RATE, np.frombuffer(data[k * FRAME:(k + 1) * FRAME], dtype="<i2"))
                for k in range(count)]


def reply_wav(text: str, path: Path, pause_ms: float, tail_s: int, cache: Path | None = None) -> float:
    """The reply as pcm16 8 kHz: each `|`-separated sentence spoken by tamesu's voice toolkit (Piper) and cut to
    its voiced part, `pause_ms` of silence between two (so the pause is all the silence there is), no lead-in
    (the reply starts with its first voiced sample), and `tail_s` of silence after (baresip's file source ends
    the call when its file ends). Returns the seconds of the reply before that tail. With `cache` (the agent's
    `--prompt-cache`) each sentence is spoken once for the agents that share it: the SIP clock test's three
    agents, started side by side, each loaded Piper for the same two sentences (20-40 s of its wall clock at
    load 5-7)."""
    parts = [_voiced_sentence(sentence.strip(), cache) for sentence in text.split("|")]
    gap = np.zeros(round(pause_ms * RATE / 1000), dtype="<i2")
    joined = [parts[0]]
    for part in parts[1:]:
        joined += [gap, part]
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(np.concatenate([*joined, np.zeros(tail_s * RATE, dtype="<i2")]).tobytes())
    return sum(part.size for part in joined) / RATE


def _voiced_sentence(sentence: str, cache: Path | None) -> np.ndarray:
    """A sentence spoken and cut to its voiced part (8 kHz pcm16), through `cache` when given."""
    kept = None
    if cache is not None:
        key = hashlib.sha256(json.dumps(["reply", sentence, RATE, VOICED]).encode()).hexdigest()[:24]
        kept = cache / f"{key}.pcm"
        if kept.is_file():
            return np.frombuffer(kept.read_bytes(), dtype="<i2")
    from tamesu.audio import tts

    clip, _ = asyncio.run(tts.say(sentence))  # before the agent's own loop starts
    samples = clip.at(RATE).samples.astype("<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > VOICED)
    voiced = samples[loud[0]:loud[-1] + 1] if loud.size else samples
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        aside = kept.with_suffix(f".{os.getpid()}.part")  # renamed whole: an agent reading it sees all or none
        aside.write_bytes(voiced.tobytes())
        aside.replace(kept)
    return voiced
