"""Reading an HTTP answer's body in pieces and stopping at `max_response_bytes`: an agent that sends 50 MB, or
never stops sending, costs tamesu at most the limit in memory and the time it takes to read that much."""

from __future__ import annotations

import codecs
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import httpx

from tamesu.conversation import Session, TurnError
from tamesu.net.direct import DEFAULT_HEADERS

UNREADABLE_CODINGS = ("br", "zstd", "compress", "x-compress")
"""Content codings tamesu cannot decode (it asks for gzip and deflate alone)."""
ACCEPTED_CODINGS = DEFAULT_HEADERS["Accept-Encoding"]


@dataclass
class Reading:
    """How much of one body was read, and whether tamesu stopped before its end."""

    limit: int
    read: int = 0
    cut: bool = False
    declared: int | None = None
    """The body's Content-Length, when the agent sent one."""

    def note(self, what: str) -> str:
        total = f" of {self.declared:,}" if self.declared is not None else " (the agent sent more)"
        return (f"{what} was larger than max_response_bytes ({self.limit:,}): read {self.read:,} bytes{total}, "
                f"then stopped")

    def record(self, session: Session, what: str) -> None:
        """Says the cut in the result: a `response_truncated` event (the same name bound_turn uses)."""
        session.event("response_truncated", limit=self.limit, sizes={"body": self.read}, read=self.read,
                      declared=self.declared, complete=False, note=self.note(what))


def reading_of(headers: Mapping[str, str], limit: int) -> Reading:
    declared = headers.get("content-length", "")
    # a compressed body's length says nothing about the decoded bytes the limit counts
    encoded = headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")
    return Reading(limit=limit, declared=int(declared) if declared.isdigit() and not encoded else None)


async def bounded_chunks(raw: AsyncIterator[bytes], content_encoding: str, reading: Reading) -> AsyncIterator[bytes]:
    """The body's bytes (`raw`, as they came), decoded from gzip or deflate (`content_encoding`), until
    `reading.limit`: then `reading.cut` is set and nothing more is read (the caller closes the response, which
    drops the connection). A compression tamesu never asked for and cannot undo (br, zstd) fails the turn: read
    as it came, its bytes were graded as the reply or said to be malformed JSON. Other encodings are passed on as
    they came, as httpx passes them without a decoder."""
    coding = content_encoding.strip().lower()
    if coding in UNREADABLE_CODINGS:
        raise TurnError(f"the answer is compressed with {coding} (Content-Encoding), which tamesu does not read and "
                        f"did not ask for (Accept-Encoding: {ACCEPTED_CODINGS}): the agent's server ignored it")
    if reading.declared is not None and reading.declared <= reading.limit:
        # the agent said the body's length, within the limit, and did not compress it (`reading_of`): the framing
        # ends it there, so it is read as it comes
        async for chunk in raw:
            reading.read += len(chunk)
            yield chunk
        return
    encoding = content_encoding.strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        # inflated here, at most up to the limit per step: a 60 kB piece of gzip can hold 20 MB
        pieces = _inflated(raw, reading, gzip=encoding != "deflate")
    else:
        pieces = _counted(raw, reading)
    async for piece in pieces:
        yield piece


async def _counted(raw: AsyncIterator[bytes], reading: Reading) -> AsyncIterator[bytes]:
    async for chunk in raw:
        room = reading.limit - reading.read
        if len(chunk) > room:
            if room:
                reading.read += room
                yield chunk[:room]
            reading.cut = True
            return
        reading.read += len(chunk)
        yield chunk


async def _inflated(raw: AsyncIterator[bytes], reading: Reading, *, gzip: bool) -> AsyncIterator[bytes]:
    wbits = 16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    started = False
    async for data in raw:
        while data:
            room = reading.limit - reading.read
            try:
                out = inflater.decompress(data, room + 1)  # one byte past the room says there is more
            except zlib.error as exc:
                if not gzip and not started:  # deflate without its zlib header, as some servers send it
                    inflater, wbits = zlib.decompressobj(-zlib.MAX_WBITS), -zlib.MAX_WBITS
                    started = True
                    continue
                raise httpx.DecodingError(f"the {'gzip' if gzip else 'deflate'} body is broken: {exc}") from exc
            started = True
            data = inflater.unconsumed_tail
            if inflater.eof and inflater.unused_data:  # another gzip member follows
                data, inflater = inflater.unused_data + data, zlib.decompressobj(wbits)
            if len(out) > room:
                if room:
                    reading.read += room
                    yield out[:room]
                reading.cut = True
                return
            reading.read += len(out)
            if out:
                yield out


async def lines(chunks: AsyncIterator[bytes], encoding: str, reading: Reading) -> AsyncIterator[str]:
    """Lines (without their ending: \\n, \\r\\n or \\r) as an event stream splits them. A last line cut off
    by the limit is dropped, since half an event is no event."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    buffer = ""
    async for chunk in chunks:
        buffer += decoder.decode(chunk)
        # a \r at the end may be the first half of \r\n: it waits for the next piece
        held = buffer.endswith("\r")
        *whole, buffer = buffer[:-1 if held else None].replace("\r\n", "\n").replace("\r", "\n").split("\n")
        buffer += "\r" if held else ""
        for line in whole:
            yield line
    buffer += decoder.decode(b"", final=True)
    if buffer and not reading.cut:
        yield buffer.removesuffix("\r")
