"""Telling an agent that sends audio in another encoding than the one agreed (pcm16 where mu-law was agreed):
the first windows of its audio are looked at, and audio that is noise as agreed and speech as another fails
the turn naming both. Without it such audio was heard as nothing, and the turn read "the agent said nothing"."""

from __future__ import annotations

from tamesu.conversation import TurnError

SNIFF_BYTES = 3200
"""A window of the agent's audio in which to tell its encoding (0.1-0.2 s)."""
SNIFF_LIMIT = 64000
"""Windows are looked at until this much audio has passed (silence says nothing, speech decides)."""


class EncodingSniffer:
    """`check(data)` with each chunk of the agent's audio, as it came off the wire."""

    def __init__(self, agreed: str, key: str) -> None:
        self.agreed, self.key = agreed, key
        """The encoding agreed and the key that sets it (`audio.encoding`, or Twilio's fixed mu-law)."""
        self._window = bytearray()
        self._seen = 0
        self._done = False

    def check(self, data: bytes) -> None:
        if self._done:
            return
        self._window.extend(data)
        if len(self._window) < SNIFF_BYTES:
            return
        from tamesu.audio.sniff import likely_encoding

        window = bytes(self._window)
        self._window.clear()
        self._seen += len(window)
        self._done = self._seen >= SNIFF_LIMIT
        other = likely_encoding(window, self.agreed)  # type: ignore[arg-type]  # an Encoding, as the spec said
        if other is not None:
            raise TurnError(f"the agent's audio is noise as {self.agreed} and sounds like speech as {other}: "
                            f"{self.key} is {self.agreed}, the agent sends {other}?")
