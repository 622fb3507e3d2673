"""The rest target against agents that send more than `max_response_bytes`, or never stop sending: tamesu reads
up to the limit and stops, so memory and time stay bounded, and the cut is said in the result."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from sessions import events
from tamesu.conversation import TurnError, UserTurn
from tamesu.net.serve import ThreadServer
from tamesu.targets.rest.body import Reading, bounded_chunks
from targets.test_rest_target import make_session, opened

LIMIT = 1_000_000
CHUNK = "word " * 13_000  # 65 kB a piece


async def _forever(request: Request, first: str, piece: str) -> AsyncIterator[str]:
    """`first`, then `piece` again and again until the client goes away (uvicorn drops what is sent to a
    closed connection without a word, so without the check this loop would hold the server's loop forever)."""
    yield first
    while not await request.is_disconnected():
        yield piece


async def _endless_text(request: Request) -> Response:
    return StreamingResponse(_forever(request, "", CHUNK), media_type="text/plain")


async def _endless_json(request: Request) -> Response:
    return StreamingResponse(_forever(request, '{"text": "', CHUNK), media_type="application/json")


async def _endless_events(request: Request) -> Response:
    return StreamingResponse(_forever(request, "", 'data: {"delta": "word "}\n\n' * 500),
                             media_type="text/event-stream")


async def _endless_line(request: Request) -> Response:
    # one event whose data line never ends: no line break ever comes
    return StreamingResponse(_forever(request, 'data: {"delta": "hi"}\n\ndata: ', CHUNK),
                             media_type="text/event-stream")


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b"word " * 4_000_000, compresslevel=9)  # 20 MB in about 60 kB


async def _gzip_bomb(_: Request) -> Response:
    return Response(_bomb(), media_type="text/plain", headers={"Content-Encoding": "gzip"})


async def _sized(_: Request) -> Response:
    return Response(("word " * 1_000_000).encode(), media_type="text/plain")  # 5 MB with a Content-Length


async def _sized_near_the_limit(request: Request) -> Response:
    size = LIMIT + int(request.query_params.get("over", "0"))
    return Response(b"w" * size, media_type="text/plain")  # with its Content-Length


WS_MESSAGE = json.dumps({"delta": "word " * 1000})


async def _endless_messages(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.receive_text()
    gone = asyncio.Event()

    async def watch() -> None:
        # uvicorn drops what is sent to a closed websocket with a log line, not an error: the close comes here
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            while True:
                await websocket.receive_text()
        gone.set()

    watcher = asyncio.create_task(watch())
    try:
        while not gone.is_set():  # blocks once tamesu stops reading (its queue is full)
            await websocket.send_text(WS_MESSAGE)
            await asyncio.sleep(0)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    finally:
        watcher.cancel()


def _app() -> Starlette:
    routes = [("/endless-text", _endless_text), ("/endless-json", _endless_json), ("/endless-events",
              _endless_events), ("/endless-line", _endless_line), ("/sized", _sized),
              ("/sized-near-the-limit", _sized_near_the_limit), ("/gzip-bomb", _gzip_bomb)]
    return Starlette(routes=[*(Route(path, handler, methods=["POST"]) for path, handler in routes),
                             WebSocketRoute("/endless-ws", _endless_messages)])


@pytest.fixture(scope="module")
def flooding() -> Iterator[str]:
    with ThreadServer(_app()) as server:
        yield server.url


def _spec(url: str, **extra: Any) -> dict[str, Any]:
    # a turn timeout far beyond what reading 1 MB takes: an unbounded read would end on it instead
    return {"url": url, "max_response_bytes": LIMIT, "turn_timeout": 120, **extra}


async def _peak_while(coroutine: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        try:
            outcome = await coroutine
        except TurnError as exc:
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_an_endless_text_answer_is_read_up_to_the_limit_and_said(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    async with opened(_spec(f"{flooding}/endless-text"), session) as target:
        turn, peak = await _peak_while(target.send(UserTurn(text="hi")))
    assert not isinstance(turn, TurnError), turn
    assert len(turn.text.encode()) == LIMIT and turn.text.startswith("word word")
    assert peak < 12 * LIMIT, peak  # the text, its bytes and a few pieces in flight; not what was sent
    [cut] = events(session, "response_truncated")
    assert cut["read"] == LIMIT and cut["declared"] is None and cut["complete"] is False
    assert cut["note"] == ("the answer was larger than max_response_bytes (1,000,000): read 1,000,000 bytes "
                           "(the agent sent more), then stopped")


async def test_a_sized_answer_over_the_limit_names_its_length(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    async with opened(_spec(f"{flooding}/sized"), session) as target:
        turn = await target.send(UserTurn(text="hi"))
    assert len(turn.text.encode()) == LIMIT
    [cut] = events(session, "response_truncated")
    assert cut["declared"] == 5_000_000 and "read 1,000,000 bytes of 5,000,000" in cut["note"]


@pytest.mark.parametrize("over", [0, 1])
async def test_a_sized_answer_at_the_limit_is_read_whole_and_one_byte_over_is_cut(tmp_path: Path, flooding: str,
                                                                                  over: int) -> None:
    session = make_session(tmp_path)
    async with opened(_spec(f"{flooding}/sized-near-the-limit?over={over}"), session) as target:
        turn = await target.send(UserTurn(text="hi"))
    assert turn.text == "w" * LIMIT
    cuts = events(session, "response_truncated")
    if over:
        [cut] = cuts
        assert cut["declared"] == LIMIT + 1 and f"read {LIMIT:,} bytes of {LIMIT + 1:,}" in cut["note"]
    else:
        assert cuts == []


async def test_a_compressed_answer_is_counted_as_it_inflates(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    _bomb()  # made before memory is traced: the server is in this process
    async with opened(_spec(f"{flooding}/gzip-bomb"), session) as target:
        turn, peak = await _peak_while(target.send(UserTurn(text="hi")))
    assert len(turn.text.encode()) == LIMIT and turn.text.startswith("word word")
    assert peak < 12 * LIMIT, peak  # not the 20 MB it inflates to
    [cut] = events(session, "response_truncated")
    assert cut["declared"] is None and cut["read"] == LIMIT  # its Content-Length is of the compressed bytes


async def test_an_endless_json_answer_fails_the_turn_and_keeps_an_excerpt(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    async with opened(_spec(f"{flooding}/endless-json"), session) as target:
        error, peak = await _peak_while(target.send(UserTurn(text="hi")))
    assert isinstance(error, TurnError)
    assert str(error).startswith("the JSON answer was larger than max_response_bytes (1,000,000): read "
                                 "1,000,000 bytes (the agent sent more), then stopped: a cut JSON document "
                                 "cannot be read (raise the target's max_response_bytes to read it): "
                                 '{"text": "word word'), str(error)[:300]
    assert error.raw["truncated"] is True and error.raw["bytes_read"] == LIMIT
    assert len(error.raw["excerpt"]) == 2000
    assert peak < 12 * LIMIT, peak
    assert len(events(session, "response_truncated")) == 1


async def test_an_endless_event_stream_ends_at_the_limit_with_the_events_before_it(tmp_path: Path,
                                                                                  flooding: str) -> None:
    # a smaller limit than the others': each event is parsed and kept, and under tracemalloc the 38,000
    # events of 1 MB took 1.7 s of CPU; the stream is endless all the same, so only a bounded read ends
    limit = 200_000
    session = make_session(tmp_path)
    spec = _spec(f"{flooding}/endless-events", streaming="sse", max_response_bytes=limit)
    async with opened(spec, session) as target:
        turn, peak = await _peak_while(target.send(UserTurn(text="hi")))
    assert not isinstance(turn, TurnError), turn
    event_bytes = len('data: {"delta": "word "}\n\n')
    whole = limit // event_bytes  # the event cut in half at the limit is dropped
    assert turn.text == "word " * whole
    assert len(turn.raw) == whole
    assert peak < 60 * limit, peak  # each event is kept as a parsed document: bounded by the limit's count
    [cut] = events(session, "response_truncated")
    assert cut["note"].startswith("the event stream was larger than max_response_bytes (200,000)")


async def test_an_event_line_that_never_ends_is_cut_at_the_limit(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    async with opened(_spec(f"{flooding}/endless-line", streaming="sse"), session) as target:
        turn, peak = await _peak_while(target.send(UserTurn(text="hi")))
    assert not isinstance(turn, TurnError), turn
    assert turn.text == "hi"  # the event before it; the endless one is dropped
    assert peak < 12 * LIMIT, peak
    assert len(events(session, "response_truncated")) == 1


async def test_endless_websocket_messages_end_the_turn_at_the_limit(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    url = flooding.replace("http://", "ws://") + "/endless-ws"
    async with opened(_spec(url, streaming="websocket"), session) as target:
        turn = await target.send(UserTurn(text="hi"))
    whole = LIMIT // len(WS_MESSAGE)  # the message that would pass the limit is not taken
    assert turn.text == "word " * 1000 * whole
    [cut] = events(session, "response_truncated")
    assert cut["read"] == whole * len(WS_MESSAGE)
    assert cut["note"].startswith("the websocket answer was larger than max_response_bytes (1,000,000)")


async def test_a_post_to_the_listener_past_the_limit_is_refused_and_said(tmp_path: Path, flooding: str) -> None:
    session = make_session(tmp_path)
    spec = _spec(f"{flooding}/sized", response={"listen": {"path": "/hooks/reply"}})
    async with opened(spec, session), httpx.AsyncClient(timeout=30) as http:
        listen_url = events(session, "transport")[0]["listen_url"]
        small = await http.post(listen_url, json={"text": "fits"})
        big = await http.post(listen_url, content=b"y" * (3 * LIMIT))  # under the listener's former 16 MB
    assert small.status_code == 200 and big.status_code == 413
    [refused] = events(session, "listen_post_too_large")
    assert refused["limit"] == LIMIT
    assert refused["note"].startswith("a post to /hooks/reply was larger than max_response_bytes (1,000,000)")


def test_a_run_against_an_endless_answer_writes_little_and_says_the_cut(tmp_path: Path, flooding: str,
                                                                        tamesu: Any) -> None:
    (tmp_path / "flood.tamesu.yaml").write_text(f"""\
targets:
  text: {{ type: rest, url: "{flooding}/endless-text", max_response_bytes: 100000 }}
  data: {{ type: rest, url: "{flooding}/endless-json", max_response_bytes: 100000 }}
tests:
  - name: text
    target: text
    scenario: {{ script: [{{ say: hi }}] }}
    assert: [{{ contains: word }}]
  - name: data
    target: data
    scenario: {{ script: [{{ say: hi }}] }}
""")
    done = tamesu(["run", "flood.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASS  flood/text" in done.stdout and "FAIL  flood/data" in done.stdout
    assert "the JSON answer was larger than max_response_bytes (100,000)" in done.stdout
    for name in ("text", "data"):
        [run] = list((tmp_path / "out").glob(f"*/flood/{name}/run-1"))
        written = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        assert written < 400_000, (name, written)  # the text once (100 kB) and excerpts
        detail = json.loads((run / "result.json").read_text())
        [cut] = [e["data"] for e in detail["events"] if e["name"] == "response_truncated"]
        assert cut["limit"] == 100_000 and cut["read"] == 100_000


@functools.cache
def _body() -> bytes:
    return b"".join(f"line {i} ".encode() for i in range(200_000))  # 2.3 MB


# made when a test asks, not at import: each xdist worker collects this module (0.27 s of CPU in each)
ENCODED: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("gzip", gzip.compress),
    "two gzip members": ("gzip", lambda body: gzip.compress(body[:5000]) + gzip.compress(body[5000:])),
    "deflate": ("deflate", zlib.compress),
    "deflate without its zlib header": ("deflate", lambda body: zlib.compress(body)[2:-4])}


@functools.cache
def _encoded(name: str) -> tuple[str, bytes]:
    encoding, encode = ENCODED[name]
    return encoding, encode(_body())


@pytest.mark.parametrize("name", list(ENCODED))
@pytest.mark.parametrize("limit", [10_000_000, 100_000])
async def test_a_compressed_body_inflates_to_the_same_bytes_up_to_the_limit(name: str, limit: int) -> None:
    encoding, data = _encoded(name)
    body = _body()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), 7000):
            yield data[start:start + 7000]

    reading = Reading(limit=limit)
    read = b"".join([piece async for piece in bounded_chunks(pieces(), encoding, reading)])
    assert read == body[:limit] and reading.read == len(read)
    assert reading.cut is (limit < len(body))
