"""A phone for tests: one SIP call at a time, placed or answered by a worker process (see `_worker`).

Everything the call does arrives as timestamped events on the monotonic clock the rest of tamesu uses, so the
call metrics (`call_setup_ms`, `ring_ms`, `greeting_ms`, `call_duration_ms`) and the audio metrics come from
the transport's own times.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import itertools
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

SAMPLE_RATE = 8000
"""The call's audio: pcm16 mono at 8 kHz (G.711 on the wire)."""


class SipUnavailable(RuntimeError):
    """The SIP stack (pjsua2) is not installed, or its worker would not start."""


def available() -> str | None:
    """Why a call cannot be made here, or None."""
    if importlib.util.find_spec("pjsua2") is None:
        return "the sip target needs pjsua2: pip install 'tamesu[sip]'"
    return None


@dataclass
class CallState:
    state: str
    at: float
    code: int = 0
    reason: str = ""
    by: str | None = None
    unreached: bool = False
    """Ended by PJSIP itself with no answer from the far end (a transport error, a request nobody answered)."""


@dataclass
class Call:
    """What one call did, as it happened."""

    states: list[CallState] = field(default_factory=list)
    audio: list[tuple[float, bytes]] = field(default_factory=list)
    """The agent's audio: (when the first frame of the chunk arrived, pcm16 8 kHz)."""
    dtmf: list[tuple[float, str]] = field(default_factory=list)
    transfers: list[tuple[float, str]] = field(default_factory=list)
    played: dict[str, dict[str, float]] = field(default_factory=dict)
    """Each utterance's `start` and `end`: when its first and last frame went out."""
    incoming: tuple[float, str] | None = None
    errors: list[str] = field(default_factory=list)
    registration: tuple[int, str] | None = None
    """The trunk's last answer to our REGISTER (status, reason), when the call registers first."""
    registration_unanswered: bool = False
    """The REGISTER had no answer at all: PJSIP gave up on it (its own 408, after some 32 s of retransmissions)."""
    not_placed: str | None = None
    """Why the SIP stack would not place the call (PJSIP's reason: an unsupported transport, a bad URI)."""

    def first(self, state: str) -> CallState | None:
        return next((s for s in self.states if s.state == state), None)

    @property
    def ended(self) -> CallState | None:
        return self.first("disconnected")

    @property
    def registration_refused(self) -> str | None:
        """`403 Forbidden` when the REGISTER before the call failed (the call is then never placed)."""
        if self.registration is None or 200 <= self.registration[0] < 300 or self.registration_unanswered:
            return None
        return f"{self.registration[0]} {self.registration[1]}".strip()


class SipPhone:
    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._ids = itertools.count(1)
        self.call = Call()
        self.local: str | None = None
        self.listening: str | None = None
        self.log: list[str] = []
        """PJSIP's log lines, as the worker wrote them (unmasked: `log_level` asks for them)."""

    async def start(self, bind: str = "127.0.0.1", port: int = 0, user: str = "tamesu",
                    timeout: float = 10.0, log_level: int = 0) -> str:
        """Start the worker; returns the local SIP address (`host:port`). With `log_level` (PJSIP's, 1-6) the
        worker's log comes back in `log`."""
        reason = available()
        if reason:
            raise SipUnavailable(reason)
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tamesu.targets.sip._worker", bind, str(port), user, str(log_level),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            limit=1 << 22)
        self._reader = asyncio.create_task(self._read())
        try:
            await self._until(lambda: self.local is not None or bool(self.call.errors) or self._gone(), timeout)
        except TimeoutError:
            await self.close()
            raise SipUnavailable(f"the SIP worker did not start within {timeout:g}s") from None
        if self.local is None:
            errors = "; ".join(self.call.errors) or "it exited"
            await self.close()
            raise SipUnavailable(f"the SIP worker did not start: {errors}")
        return self.local

    async def dial(self, uri: str, *, identity: str | None = None, headers: dict[str, str] | None = None,
                   auth: dict[str, str] | None = None, registrar: str | None = None) -> None:
        await self._send({"op": "call", "uri": uri, "from": identity, "headers": headers or {}, "auth": auth,
                          "registrar": registrar})

    async def listen(self, user: str, timeout: float = 5.0) -> str:
        """Take calls for `user` at this phone's address; returns once calls are taken (the URI to call)."""
        await self._send({"op": "listen", "user": user})
        try:
            await self._until(lambda: self.listening is not None or bool(self.call.errors) or self._gone(), timeout)
        except TimeoutError:
            raise SipUnavailable(f"the SIP worker did not take calls within {timeout:g}s") from None
        if self.listening is None:
            raise SipUnavailable(f"the SIP worker cannot take calls: {'; '.join(self.call.errors) or 'it exited'}")
        return self.listening

    async def answer(self, after_ms: float = 0) -> None:
        await self._send({"op": "answer", "after_ms": after_ms})

    async def play(self, pcm: bytes) -> str:
        """Queue an utterance (pcm16 8 kHz); it goes out at the call's real-time pace. Returns its id."""
        utterance = f"u{next(self._ids)}"
        await self._send({"op": "play", "id": utterance, "pcm": base64.b64encode(pcm).decode()})
        return utterance

    async def frame(self, pcm: bytes) -> None:
        """Append audio to what goes out (already paced by the caller); no `played` event."""
        await self._send({"op": "frame", "pcm": base64.b64encode(pcm).decode()})

    async def mark(self) -> str:
        """A mark after the audio sent so far with `frame`; `wait_played` says when that audio had gone out."""
        mark = f"m{next(self._ids)}"
        await self._send({"op": "mark", "id": mark})
        return mark

    async def dtmf(self, digits: str) -> None:
        await self._send({"op": "dtmf", "digits": digits})

    async def hangup(self) -> None:
        await self._send({"op": "hangup"})

    async def wait_for(self, states: Iterable[str], timeout: float) -> CallState | None:
        """The first of `states` (or the call's end), or None after `timeout`."""
        wanted = set(states) | {"disconnected"}
        try:
            await self._until(lambda: any(s.state in wanted for s in self.call.states)
                              or self.call.not_placed is not None or self.call.registration_refused is not None
                              or self.call.registration_unanswered
                              or self._gone(), timeout)
        except TimeoutError:
            return None
        return next((s for s in self.call.states if s.state in wanted), None)

    async def wait_played(self, utterance: str, timeout: float) -> float | None:
        """When the utterance's last frame went out, or None (the call ended first, or `timeout`)."""
        with contextlib.suppress(TimeoutError):
            await self._until(lambda: "end" in self.call.played.get(utterance, {}) or self.call.ended is not None
                              or self._gone(), timeout)
        return self.call.played.get(utterance, {}).get("end")

    async def wait_incoming(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await self._until(lambda: self.call.incoming is not None or self._gone(), timeout)
        return self.call.incoming is not None

    async def close(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(Exception):
                await self._write(process, {"op": "quit"})
                assert process.stdin is not None
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 3.0)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._reader, 1.0)

    # ---- the pipes -------------------------------------------------------------------------------------

    async def _send(self, command: dict[str, Any]) -> None:
        if self._process is None or self._process.returncode is not None:
            raise SipUnavailable("the SIP worker is not running")
        await self._write(self._process, command)

    @staticmethod
    async def _write(process: asyncio.subprocess.Process, command: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write((json.dumps(command) + "\n").encode())
        await process.stdin.drain()

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stream = self._process.stdout
        while line := await stream.readline():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self._apply(event)
            self._changed.set()
        await self._process.wait()  # its exit status says why it went (`gone`)
        self._changed.set()

    def gone(self) -> str | None:
        """Why the worker is no longer there (it exited or was killed), or None while it runs."""
        if self._process is None or self._reader is None or not self._reader.done():
            return None
        code = self._process.returncode
        return f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"

    def _apply(self, event: dict[str, Any]) -> None:
        kind, at = event.get("ev"), float(event.get("t", time.monotonic()))
        call = self.call
        if kind == "ready":
            self.local = event["local"]
        elif kind == "listening":
            self.listening = str(event["uri"])
        elif kind == "state":
            call.states.append(CallState(event["state"], at, int(event.get("code") or 0),
                                         str(event.get("reason") or ""), event.get("by"), bool(event.get("unreached"))))
        elif kind == "audio":
            call.audio.append((at, base64.b64decode(event["pcm"])))
        elif kind == "played":
            call.played.setdefault(event["id"], {})[event["edge"]] = at
        elif kind == "dtmf":
            call.dtmf.append((at, str(event["digit"])))
        elif kind == "transfer":
            call.transfers.append((at, str(event["to"])))
        elif kind == "log":
            self.log.append(str(event.get("line", "")))
        elif kind == "registration":
            call.registration = (int(event.get("code") or 0), str(event.get("reason") or ""))
            call.registration_unanswered = event.get("answered") is False
        elif kind == "incoming":
            call.incoming = (at, str(event.get("remote", "")))
        elif kind == "error":
            call.errors.append(str(event.get("message", "")))
            if event.get("op") == "call":
                call.not_placed = str(event.get("reason") or event.get("message") or "")

    def _gone(self) -> bool:
        return self._process is None or self._reader is None or self._reader.done()

    async def _until(self, condition: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
