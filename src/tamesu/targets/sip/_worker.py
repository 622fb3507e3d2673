"""The SIP user agent, in a process of its own: `python -m tamesu.targets.sip._worker`.

PJSIP (through pjsua2) keeps one library instance per process, asserts rather than raises on some misuse, and
wants every call made from the thread that pumps its events. So each call runs in a worker process that the
`SipPhone` in the test process talks to over pipes, one JSON object per line:

- commands on stdin: `{"op": "call", "uri", "from", "headers", "auth", "registrar"}`, `{"op": "listen"}` (wait
  for the agent to call), `{"op": "answer", "after_ms"}`, `{"op": "play", "id", "pcm"}` (base64 pcm16 8 kHz
  mono, queued and sent at the call's own 20 ms clock), `{"op": "frame", "pcm"}` (audio the parent paces itself),
  `{"op": "mark", "id"}` (a `played` end event once the frames sent before it have gone out),
  `{"op": "dtmf", "digits"}` (RFC 4733), `{"op": "hangup"}`, `{"op": "quit"}`;
- events on stdout, each with `t` (CLOCK_MONOTONIC seconds, the same clock as the parent's): `ready` (the local SIP
  address), `listening` (calls for that user are taken now), `state` (`calling`, `early` with its status code,
  `connecting`, `confirmed`, `disconnected` with the status, reason, who ended it and `unreached` when PJSIP
  ended it with no answer from the far end), `incoming`, `audio` (100 ms
  of the agent's audio, base64, the time its first frame's RTP arrived: when it reached the audio port less
  how long ago that was by PJSIP's figures, `_held`; a sound rising out of silence starts a chunk of its own),
  `registration` (the trunk's answer to the REGISTER a `call` with a `registrar` waits for: the call is placed
  only after a 2xx; `answered` false when no answer came and PJSIP gave up on it), `log` (a line of PJSIP's log,
  with `TAMESU_SIP_LOG` set: see `SipLog`), `played` (an utterance's first and last frame
  went out), `dtmf` (a digit the agent sent), `transfer` (the agent's REFER target; declined, since there is nobody
  to transfer to), `error`.

The worker dies with its parent (PR_SET_PDEATHSIG) and ends its call when stdin closes.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from typing import Any

import pjsua2 as pj

from tamesu.audio import level
from tamesu.targets.sip._held import HeldAudio

FRAME_BYTES = 320
"""20 ms of pcm16 at 8 kHz."""
AUDIO_CHUNK_FRAMES = 5
_SILENCE = b"\0" * FRAME_BYTES


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_EVENTS = sys.stdout
"""Where events go: the original stdout. PJSIP (and anything native) writes to fd 1, which `main` points at
stderr, so nothing but events ever reaches the parent's pipe."""


def _own_stdout() -> None:
    global _EVENTS
    _EVENTS = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)


_WRITING = threading.Lock()
"""PJSIP's log and the media clock's audio come from threads of their own: one event a line, never interleaved."""


def emit(event: str, **data: object) -> None:
    _write(json.dumps({"ev": event, "t": time.monotonic(), **data}))


def _write(line: str) -> None:
    with _WRITING:
        _EVENTS.write(line + "\n")
        _EVENTS.flush()


class SipLog(pj.LogWriter):  # type: ignore[misc]  # pjsua2 ships no types
    """PJSIP's log as `log` events: the parent masks the secrets and writes it to the run's `sip.log`."""

    def write(self, entry: Any) -> None:
        emit("log", line=str(entry.msg).rstrip("\n"))


class Port(pj.AudioMediaPort):  # type: ignore[misc]  # pjsua2 ships no types
    """Where the call's audio meets the pipes: frames out from the queued utterances, frames in to the parent."""

    def __init__(self) -> None:
        super().__init__()
        self.outgoing: deque[tuple[str, bytes]] = deque()
        self._current: tuple[str, bytes, int] | None = None
        self._incoming = bytearray()
        self._incoming_at = 0.0
        self._incoming_sounds = False
        self._streamed = bytearray()
        self._marks: list[tuple[str, int]] = []
        """Marks in the streamed audio: (id, bytes of it still to go out before the mark)."""
        self._streamed_out_at = 0.0
        self._lock = threading.Lock()  # the media clock's thread takes frames, the main thread marks
        self.held = HeldAudio(FRAME_BYTES / 16)  # the media clock ticks once a frame (pcm16 at 8 kHz)

    def mark(self, mark_id: str) -> None:
        """`played` (end) once what was streamed so far has gone out: when the caller's words really ended."""
        with self._lock:
            if self._streamed:
                self._marks.append((mark_id, len(self._streamed)))
                return
            at = self._streamed_out_at or time.monotonic()
        emit("played", id=mark_id, edge="end", t=at)

    def stream(self, pcm: bytes) -> None:
        """Audio the parent paces itself: it goes out as it comes, after any queued utterance."""
        self._streamed += pcm

    def onFrameRequested(self, frame: Any) -> None:
        chunk = _SILENCE
        if self._current is None and not self.outgoing and self._streamed:
            with self._lock:
                chunk = bytes(self._streamed[:FRAME_BYTES]).ljust(FRAME_BYTES, b"\0")
                del self._streamed[:FRAME_BYTES]
                self._streamed_out_at = time.monotonic()
                due = [mark for mark, left in self._marks if left <= FRAME_BYTES]
                self._marks = [(mark, left - FRAME_BYTES) for mark, left in self._marks if left > FRAME_BYTES]
            for mark in due:
                emit("played", id=mark, edge="end")
        elif self._current is None and self.outgoing:
            utterance_id, pcm = self.outgoing.popleft()
            self._current = (utterance_id, pcm, 0)
            emit("played", id=utterance_id, edge="start")
        if self._current is not None:
            utterance_id, pcm, position = self._current
            chunk = pcm[position:position + FRAME_BYTES].ljust(FRAME_BYTES, b"\0")
            position += FRAME_BYTES
            if position >= len(pcm):
                self._current = None
                emit("played", id=utterance_id, edge="end")
            else:
                self._current = (utterance_id, pcm, position)
        frame.type = pj.PJMEDIA_FRAME_TYPE_AUDIO
        frame.buf = pj.ByteVector(chunk)
        frame.size = FRAME_BYTES

    def onFrameReceived(self, frame: Any) -> None:
        pcm = bytes(frame.buf)
        sounds = level.sounds(pcm)
        if sounds and not self._incoming_sounds:
            # a reply's first sound starts a chunk: at the end of a chunk of the line's silence, the chunk's
            # level (how the listener tells speech) would be too low, and the reply would start a chunk later
            self.flush()
        if not self._incoming:
            self._incoming_at = time.monotonic() - self.held.ms() / 1000
        self._incoming_sounds = self._incoming_sounds or sounds
        self._incoming += pcm
        if len(self._incoming) >= FRAME_BYTES * AUDIO_CHUNK_FRAMES:
            self.flush()

    def flush(self) -> None:
        if self._incoming:
            _write(json.dumps({"ev": "audio", "t": self._incoming_at,
                               "pcm": base64.b64encode(bytes(self._incoming)).decode()}))
            self._incoming.clear()
        self._incoming_sounds = False


class Call(pj.Call):  # type: ignore[misc]  # pjsua2 ships no types
    def __init__(self, account: pj.Account, port: Port, call_id: int = pj.PJSUA_INVALID_ID) -> None:
        super().__init__(account, call_id)
        self.port = port
        self.hung_up_by_us = False
        self.ended = False

    def onCallState(self, prm: Any) -> None:
        info = self.getInfo()
        state = info.stateText.lower()
        if info.state == pj.PJSIP_INV_STATE_DISCONNECTED:
            self.port.flush()
            self.ended = True
            emit("state", state="disconnected", code=info.lastStatusCode, reason=info.lastReason,
                 by="caller" if self.hung_up_by_us else "remote", connected_s=info.connectDuration.sec
                 + info.connectDuration.msec / 1000, unreached=_unreached(prm))
            return
        emit("state", state=state, code=info.lastStatusCode)

    def onCallMediaState(self, prm: Any) -> None:
        info = self.getInfo()
        for index, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status == pj.PJSUA_CALL_MEDIA_ACTIVE:
                audio = self.getAudioMedia(index)
                audio.startTransmit(self.port)
                self.port.startTransmit(audio)

    def onStreamCreated(self, prm: Any) -> None:
        codec = self.getStreamInfo(prm.streamIdx).audCodecParam.info
        self.port.held.attach(int(prm.stream), codec.frameLen / (codec.frameLenDenum or 1))

    def onStreamDestroyed(self, prm: Any) -> None:
        self.port.held.detach()

    def onDtmfDigit(self, prm: Any) -> None:
        emit("dtmf", digit=prm.digit, method=str(prm.method))

    def onCallTransferRequest(self, prm: Any) -> None:
        emit("transfer", to=prm.dstUri)
        prm.statusCode = 603  # recorded, not followed: no one stands behind the target here


def _unreached(prm: Any) -> bool:
    """Whether the call ended without a word from the far end: PJSIP's own status, for a transport that failed (a
    name that does not resolve, a TCP connection refused) or a request nobody answered."""
    try:
        if prm.e.type != pj.PJSIP_EVENT_TSX_STATE:
            return False
        tsx = prm.e.body.tsxState
        return tsx.type in (pj.PJSIP_EVENT_TRANSPORT_ERROR, pj.PJSIP_EVENT_TIMER) and not tsx.src.rdata.wholeMsg
    except (AttributeError, pj.Error):
        return False


class Account(pj.Account):  # type: ignore[misc]  # pjsua2 ships no types
    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker

    def onIncomingCall(self, prm: Any) -> None:
        self.worker.incoming(prm.callId)

    def onRegState(self, prm: Any) -> None:
        # no message behind the status: PJSIP's own 408 once the REGISTER's retransmissions went unanswered
        emit("registration", code=prm.code, reason=prm.reason, answered=bool(prm.rdata.wholeMsg))
        self.worker.registered(prm.code)


class NoListen(Exception):
    """The SIP address to listen on is taken or not this machine's."""


class Worker:
    def __init__(self, bind: str, port: int, user: str, log_level: int) -> None:
        self.endpoint = pj.Endpoint()
        self.endpoint.libCreate()
        config = pj.EpConfig()
        config.uaConfig.threadCnt = 0
        config.uaConfig.mainThreadOnly = True
        config.uaConfig.userAgent = "tamesu"
        # PJSIP's log (TAMESU_SIP_LOG) goes to the parent, which masks it: on the worker's stderr it was lost
        config.logConfig.level = log_level
        config.logConfig.consoleLevel = log_level
        if log_level:
            self.log = SipLog()  # kept: PJSIP holds only a pointer to it
            config.logConfig.writer = self.log
            config.logConfig.decor = pj.PJ_LOG_HAS_TIME | pj.PJ_LOG_HAS_MICRO_SEC | pj.PJ_LOG_HAS_SENDER
        config.medConfig.noVad = True
        # the conference bridge at the call's own rate: at its default 16 kHz it resamples the 8 kHz audio port
        # both ways, and its buffers for that held each direction's audio a frame (measured: 20 ms out, 20-30 in)
        config.medConfig.clockRate = 8000
        self.endpoint.libInit(config)
        transport = pj.TransportConfig()
        transport.port = port
        transport.boundAddress = bind
        transport.publicAddress = bind
        try:
            transport_id = self.endpoint.transportCreate(pj.PJSIP_TRANSPORT_UDP, transport)
        except pj.Error as exc:  # the one a user's `listen` decides: said in its terms, not pjsua2's call
            raise NoListen(f"cannot listen for SIP on {bind}:{port} (listen): {exc.reason}") from None
        self._tcp(bind, self.endpoint.transportGetInfo(transport_id).localName.rpartition(":")[2])
        self.endpoint.libStart()
        self.endpoint.audDevManager().setNullDev()
        for codec in self.endpoint.codecEnum2():  # G.711 only: what every phone network carries
            priority = 255 if codec.codecId.upper().startswith(("PCMU/", "PCMA/")) else 0
            self.endpoint.codecSetPriority(codec.codecId, priority)
        local = self.endpoint.transportGetInfo(transport_id).localName
        self.local = local
        self.user = user
        self.port = Port()
        audio = pj.MediaFormatAudio()
        audio.type = pj.PJMEDIA_TYPE_AUDIO
        audio.clockRate = 8000
        audio.channelCount = 1
        audio.bitsPerSample = 16
        audio.frameTimeUsec = 20000
        self.port.createPort("tamesu", audio)
        self.account: Account | None = None
        self.call: Call | None = None
        self.pending_answer: tuple[float, Call] | None = None
        self.pending_call: tuple[str, pj.CallOpParam] | None = None
        """A call to place once the REGISTER it waits for has succeeded."""
        emit("ready", local=local)

    def _tcp(self, bind: str, port: str) -> None:
        """SIP over TCP beside UDP: a trunk with `transport: tcp` (`;transport=tcp` on the URI) needs one, or
        PJSIP refuses the call (PJSIP_EUNSUPTRANSPORT). On UDP's port when it is free, as a phone's contact."""
        for candidate in (int(port), 0):
            transport = pj.TransportConfig()
            transport.port = candidate
            transport.boundAddress = bind
            transport.publicAddress = bind
            try:
                self.endpoint.transportCreate(pj.PJSIP_TRANSPORT_TCP, transport)
                return
            except pj.Error:
                continue

    def make_account(self, identity: str, auth: dict[str, str] | None, registrar: str | None) -> Account:
        config = pj.AccountConfig()
        config.idUri = identity
        if registrar:
            config.regConfig.registrarUri = registrar
        else:
            config.regConfig.registerOnAdd = False
        if auth:
            config.sipConfig.authCreds.append(pj.AuthCredInfo("digest", auth.get("realm", "*"),
                                                              auth["username"], 0, auth["password"]))
        account = Account(self)
        account.create(config)
        return account

    def handle(self, command: dict[str, Any]) -> bool:
        op = command.get("op")
        if op == "call":
            self.account = self.make_account(command.get("from") or f"sip:{self.user}@{self.local}",
                                             command.get("auth"), command.get("registrar"))
            self.call = Call(self.account, self.port)
            parameters = pj.CallOpParam(True)
            for name, value in (command.get("headers") or {}).items():
                header = pj.SipHeader()
                header.hName, header.hValue = name, value
                parameters.txOption.headers.append(header)
            if command.get("registrar"):
                self.pending_call = (command["uri"], parameters)  # REGISTER first: a trunk may take calls only then
            else:
                self.call.makeCall(command["uri"], parameters)
        elif op == "listen":
            identity = f"sip:{command.get('user') or self.user}@{self.local}"
            self.account = self.make_account(identity, None, None)
            emit("listening", uri=identity)
        elif op == "answer" and self.call is not None:
            self.pending_answer = (time.monotonic() + command.get("after_ms", 0) / 1000, self.call)
        elif op == "frame":
            self.port.stream(base64.b64decode(command["pcm"]))
        elif op == "mark":
            self.port.mark(command["id"])
        elif op == "play":
            self.port.outgoing.append((command["id"], base64.b64decode(command["pcm"])))
        elif op == "dtmf" and self._active():
            assert self.call is not None
            self.call.dialDtmf(command["digits"])
        elif op == "hangup" and self._active():
            assert self.call is not None
            self.call.hung_up_by_us = True
            self.call.hangup(pj.CallOpParam(True))
        elif op == "quit":
            return False
        return True

    def registered(self, code: int) -> None:
        pending, self.pending_call = self.pending_call, None
        if pending is not None and 200 <= code < 300 and self.call is not None:
            try:
                self.call.makeCall(*pending)
            except pj.Error as exc:
                emit("error", message=exc.info(), op="call", reason=exc.reason)

    def incoming(self, call_id: int) -> None:
        assert self.account is not None
        call = Call(self.account, self.port, call_id)
        info = call.getInfo()
        if self.call is not None and not self.call.ended:
            busy = pj.CallOpParam()
            busy.statusCode = 486
            call.answer(busy)
            return
        self.call = call
        ringing = pj.CallOpParam()
        ringing.statusCode = 180
        call.answer(ringing)
        emit("incoming", remote=info.remoteUri)

    def _active(self) -> bool:
        try:
            return self.call is not None and not self.call.ended and self.call.isActive()
        except pj.Error:
            return False

    def pump(self) -> None:
        self.endpoint.libHandleEvents(10)
        if self.pending_answer is not None and time.monotonic() >= self.pending_answer[0]:
            _, call = self.pending_answer
            self.pending_answer = None
            if not call.ended:
                ok = pj.CallOpParam()
                ok.statusCode = 200
                call.answer(ok)

    def close(self) -> None:
        if self._active():
            assert self.call is not None
            self.call.hung_up_by_us = True
            with contextlib.suppress(pj.Error):
                self.call.hangup(pj.CallOpParam(True))
            deadline = time.monotonic() + 1.0
            while not self.call.ended and time.monotonic() < deadline:
                self.endpoint.libHandleEvents(10)
        self.port.flush()
        self.port.held.detach()  # its watch must not outlive the stream, whatever order the library ends in
        # pjsua2 asserts when a Call, an Account or a media port outlives the library: drop them first
        self.call = None
        self.pending_answer = None
        self.account = None
        del self.port
        # NO_RX_MSG: else the library idles a whole second for answers nothing is left to take (an un-REGISTER's,
        # sent as the account went above; ICE/TURN's, never used), every run's last call a second longer
        self.endpoint.libDestroy(pj.PJSUA_DESTROY_NO_RX_MSG)


def _read_commands(into: queue.Queue[dict[str, object] | None]) -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            try:
                into.put(json.loads(line))
            except ValueError:
                emit("error", message=f"not a command: {line[:80]!r}")
    into.put(None)  # stdin closed: the parent is gone or done


def main() -> int:
    _die_with_parent()
    _own_stdout()
    bind, port, user = sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "tamesu"
    log_level = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    try:
        worker = Worker(bind, port, user, log_level)
    except NoListen as exc:
        emit("error", message=str(exc))
        return 3
    except pj.Error as exc:
        emit("error", message=f"the SIP stack did not start: {exc.reason}")
        return 3
    commands: queue.Queue[dict[str, object] | None] = queue.Queue()
    threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
    running = True
    try:
        while running:
            worker.pump()
            while running:
                try:
                    command = commands.get_nowait()
                except queue.Empty:
                    break
                if command is None:
                    running = False
                    break
                try:
                    running = worker.handle(command)
                except pj.Error as exc:
                    emit("error", message=exc.info(), op=command.get("op"), reason=exc.reason)
    finally:
        worker.close()
        emit("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
