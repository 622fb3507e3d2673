"""The protocol side of an audio-socket call (`twilio`, `voice`): what tamesu sends to open, how a frame, a digit
and the hang-up travel, and what each message it receives means."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from tamesu.conversation import Session, TurnError

__all__ = ["Incoming", "Wire"]


@dataclass
class Incoming:
    """One thing the agent sent, as the wire read it."""

    kind: str
    """audio | clear | mark | transcript | text | done | hangup | ignore"""
    audio: bytes = b""
    value: Any = None


class Wire:
    """A protocol on the socket. Subclasses fill in the messages."""

    send_format: Any
    receive_format: Any
    trace_carriers: tuple[str, ...] = ()
    """Where the protocol's own messages carry the conversation's `traceparent`, beside the handshake header
    (said in the `conversation_trace` event)."""

    def opening(self, session: Session) -> list[str | bytes]:
        return []

    @abstractmethod
    def frame(self, data: bytes) -> str | bytes: ...

    def dtmf(self, digit: str) -> list[str | bytes]:
        raise TurnError("this protocol carries no DTMF")

    def closing(self) -> list[str | bytes]:
        return []

    def mark_echo(self, name: str) -> str | bytes | None:
        return None

    def silence_hint(self) -> str:
        """Why the agent may have seemed silent (a configuration that finds no audio), appended to the reason."""
        return ""

    @abstractmethod
    def read(self, message: str | bytes) -> list[Incoming]:
        """What a message means; raises TurnError for one that breaks the protocol."""
