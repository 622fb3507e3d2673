"""Real HTTP and websocket agents for testing the `rest` target, in one Starlette app.

Serve them with `serve()` (a `tamesu.net.serve.ThreadServer` on a free 127.0.0.1 port) or the fixtures in
`agents.fixtures`. Every agent keeps its state in the app instance, so each `app()` starts fresh.

What each agent says to what (MESSAGE is the user's words):

POST /chat            plain JSON. Body {message, session_id, data?}. Remembers turns per session_id.
    "crash"           -> 500 {"error": "internal failure"}
    "forbidden"       -> 403 {"error": "not allowed", "text": "You may not do that."}
    "slow"            -> waits SLOW_SECONDS, then answers like any message
    "bye"             -> {"text": "Goodbye!", "done": true}
    "human please"    -> {"text": "Let me connect you to a person.",
                          "handoff": {"active": true, "queue": "billing", "summary": "Customer wants a human"}}
    contains "book"   -> {"text": "Booked Saturday 10:00.", "tool_calls": [
                            {"name": "find_slot", "arguments": "{\"day\": \"saturday\"}", "result": {"slot": "10:00"}},
                            {"function": {"name": "book_room", "arguments": "{\"day\": \"saturday\"}"}}]}
    anything else     -> {"text": "Echo N: MESSAGE"} (N = this session's turn number)
    Every JSON answer also has "session_id", "turn", "data" (as received) and "auth" (the Authorization header).
POST /plain           text/plain "plain: MESSAGE".
POST /empty           204, no body.
POST /upload          multipart/form-data, as a browser's form posts it: {"text": "N file(s)", "fields": {name: value},
                      "files": [[field, filename, content type, size]]}.
GET  /ask             a question in the query, as GET APIs take one: {"text": "asked: Q", "query": {every parameter},
                      "body_bytes": how many bytes of body came, "content_type": its Content-Type}.
POST /sse             server-sent events: "You said MESSAGE" word by word as {"delta": " word"} events
                      (STREAM_PAUSE apart; the deltas joined give the sentence), then `data: [DONE]`.
    "final"           -> the deltas, then {"done": true, "text": <the whole reply>} and no [DONE]
    "bye"             -> {"delta": "Goodbye!"}, then {"done": true, "hangup": true}
    "tools"           -> {"tool_calls": [{"name": "lookup", "args": {"q": "x"}}]}, then the deltas, then [DONE]
    "crash"           -> 500 {"error": "stream failed"}
    "nostream"        -> a plain JSON answer {"text": "not streamed"}
    "overloaded"      -> {"delta": "Let me"}, then Anthropic's mid-stream failure, `event: error` with
                         {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, then the
                         stream ends (no [DONE])
    "gateway error"   -> {"delta": "Let me"}, then `event: error` with the text "upstream timed out", then [DONE]
    "stall"           -> {"delta": "Let me"}, then nothing for SLOW_SECONDS, the stream left open
    "malformed"       -> {"delta": "Let me"}, then `data: {"delta": " check` (JSON cut short), then [DONE]
    "bom"             -> the stream begins with a byte order mark, then the usual deltas (no `event:` lines), [DONE]
    "braces"          -> a text stream (no JSON): `data: x = `, `data: {"a": 1`, then [DONE]
    "chunk error"     -> {"delta": "Let me"}, then OpenAI's chat stream failure {"error": {"message": "server had
                         an error", "type": "server_error"}}, then [DONE]
POST /ndjson          Ollama's /api/chat as it answers by default: newline-delimited JSON (application/x-ndjson),
                      {"model", "created_at", "message": {"role": "assistant", "content": " word"}, "done": false} per
                      word of "You said MESSAGE", then {"model", "message": {... "content": ""}, "done": true}.
WS   /ws              websocket. Each JSON message {message, ...} is answered with "You said MESSAGE"
                      word by word as {"delta": " word"} messages, then {"done": true, "turn": N,
                      "key": <X-Api-Key header of the handshake>}.
    ?greet=1          -> sends {"text": "Welcome!"} as soon as the socket opens
    "bye"             -> {"delta": "Bye"}, then {"done": true, "hangup": true}
    "close"           -> closes the socket with code 1011
    "error"           -> {"delta": "Let me"}, then {"type": "error", "message": "tool backend down"}, then the usual
                         final message
    "stall"           -> {"delta": "Let me"}, then nothing until the next message
    "remind"          -> the usual answer, then, REMIND_PAUSE later, {"text": "Still there?"} unasked
POST /jobs            poll style. Body {message, session_id} -> 202 {"job": ID}.
GET  /jobs/{ID}       {"status": "pending"} for the first PENDING_POLLS polls, then
                      {"status": "done", "text": "Processed: MESSAGE"}; 404 for an unknown job.
    "crash"           -> the job's polls answer 500
    "never"           -> {"status": "pending"} for every poll
POST /bot             callback style, as Slack or Telegram bots. Body {text, callback, session_id}
                      -> 200 {"accepted": true}; then, asynchronously, it POSTs to `callback`
                      {"text": "Working on: MESSAGE"} and, CALLBACK_PAUSE later, {"text": "Done: MESSAGE"}.
    "bye"             -> posts {"text": "Bye", "end": true}
    "silent"          -> posts nothing
    Bodies the callback answered are kept in `agents.callback_answers`.
POST /conversations   session.open: 201 {"id": "conv-N", "token": "tok-N"}.
POST /conversations/{ID}/messages
                      needs "Authorization: Bearer tok-N" of that conversation (else 401 {"error": ...});
                      answers {"reply": {"text": "[conv-N] MESSAGE"}, "conversation": ID}.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tamesu.net.serve import ThreadServer

SLOW_SECONDS = 30.0
"""How long "slow", "stall" and /trickle hold their answer: far past any timeout a test gives, so a loaded machine
that runs the test's timer late still sees the timeout (at 3 s, tests gave 0.4 s, and bounded the wait at 1.5 s).
A client that gives up ends each of them at once."""
STREAM_PAUSE = 0.03
PENDING_POLLS = 2
CALLBACK_PAUSE = 0.1
REMIND_PAUSE = 0.3

BOOK_CALLS = [
    {"name": "find_slot", "arguments": json.dumps({"day": "saturday"}), "result": {"slot": "10:00"}},
    {"function": {"name": "book_room", "arguments": json.dumps({"day": "saturday"})}},
]

STREAM_FAILURES: dict[str, list[Any]] = {
    "overloaded": ['event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                   '"message": "Overloaded"}}\n\n'],
    "gateway error": ["event: error\ndata: upstream timed out\n\n", "data: [DONE]\n\n"],
    "malformed": ['data: {"delta": " check\n\n', "data: [DONE]\n\n"],
    "chunk error": [{"error": {"message": "server had an error", "type": "server_error"}}, "data: [DONE]\n\n"],
}
"""How the /sse agent's stream fails after its first delta, by the message that asks for it."""


def chunks(text: str) -> list[str]:
    """The words of `text` as a stream sends them: joined, they give `text` back."""
    words = text.split(" ")
    return [words[0], *(" " + word for word in words[1:])]


class RestAgents:
    """The state of every agent of one app: sessions, jobs, conversations, what callbacks answered."""

    def __init__(self) -> None:
        self.turns: dict[str, int] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.conversations: dict[str, str] = {}
        self.callback_answers: list[Any] = []
        self._ids = itertools.count(1)

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/chat", self.chat, methods=["POST"]),
            Route("/plain", self.plain, methods=["POST"]),
            Route("/empty", self.empty, methods=["POST"]),
            Route("/ask", self.ask, methods=["GET"]),
            Route("/upload", self.upload, methods=["POST"]),
            Route("/sse", self.sse, methods=["POST"]),
            Route("/trickle", self.trickle, methods=["POST"]),
            Route("/ndjson", self.ndjson, methods=["POST"]),
            WebSocketRoute("/ws", self.ws),
            Route("/jobs", self.create_job, methods=["POST"]),
            Route("/jobs/{job}", self.read_job, methods=["GET"]),
            Route("/bot", self.bot, methods=["POST"]),
            Route("/conversations", self.open_conversation, methods=["POST"]),
            Route("/conversations/{conv}/messages", self.conversation_message, methods=["POST"]),
        ])

    # -- POST /chat ---------------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        message = str(body.get("message", ""))
        session_id = str(body.get("session_id", ""))
        turn = self.turns[session_id] = self.turns.get(session_id, 0) + 1
        common = {"session_id": session_id, "turn": turn, "data": body.get("data"),
                  "auth": request.headers.get("authorization")}
        if message == "crash":
            return JSONResponse({"error": "internal failure"}, status_code=500)
        if message == "forbidden":
            return JSONResponse({"error": "not allowed", "text": "You may not do that.", **common},
                                status_code=403)
        if message == "slow":
            # or until the caller has given up, so the server stops at once
            deadline = time.monotonic() + SLOW_SECONDS
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.05)
        if message == "bye":
            return JSONResponse({"text": "Goodbye!", "done": True, **common})
        if message == "human please":
            return JSONResponse({"text": "Let me connect you to a person.", **common, "handoff": {
                "active": True, "queue": "billing", "summary": "Customer wants a human"}})
        if "book" in message:
            return JSONResponse({"text": "Booked Saturday 10:00.", "tool_calls": BOOK_CALLS, **common})
        return JSONResponse({"text": f"Echo {turn}: {message}", **common})

    async def plain(self, request: Request) -> Response:
        body = await request.json()
        return PlainTextResponse(f"plain: {body.get('message', '')}")

    async def empty(self, request: Request) -> Response:
        return Response(status_code=204)

    async def upload(self, request: Request) -> Response:
        form = await request.form()
        files = [[name, value.filename, value.content_type, len(await value.read())]
                 for name, value in form.multi_items() if isinstance(value, UploadFile)]
        fields = {name: value for name, value in form.multi_items() if isinstance(value, str)}
        return JSONResponse({"text": f"{len(files)} file(s)", "fields": fields, "files": files})

    async def ask(self, request: Request) -> Response:
        query = dict(request.query_params)
        body = await request.body()
        return JSONResponse({"text": f"asked: {query.get('q', '')}", "query": query, "body_bytes": len(body),
                             "content_type": request.headers.get("content-type")})

    # -- POST /sse ----------------------------------------------------------------------------------

    async def trickle(self, request: Request) -> Response:
        """A byte every 50 ms for SLOW_SECONDS: no single read waits long enough for a per-read timeout."""
        async def body() -> AsyncIterator[bytes]:
            deadline = time.monotonic() + SLOW_SECONDS
            while time.monotonic() < deadline:
                yield b" "
                await asyncio.sleep(0.05)
            yield b'{"session_id": "late"}'
        return StreamingResponse(body(), media_type="application/json")

    async def sse(self, request: Request) -> Response:
        message = str((await request.json()).get("message", ""))
        if message == "crash":
            return JSONResponse({"error": "stream failed"}, status_code=500)
        if message == "nostream":
            return JSONResponse({"text": "not streamed"})
        return StreamingResponse(self._sse_events(message), media_type="text/event-stream")

    async def _sse_events(self, message: str) -> AsyncIterator[str]:
        if message == "stall":
            yield f"data: {json.dumps({'delta': 'Let me'})}\n\n"
            await asyncio.sleep(SLOW_SECONDS)
            return
        if message == "braces":
            for data in ("x = ", '{"a": 1', "[DONE]"):
                yield f"data: {data}\n\n"
            return
        if message in STREAM_FAILURES:
            for event in [{"delta": "Let me"}, *STREAM_FAILURES[message]]:
                await asyncio.sleep(STREAM_PAUSE)
                yield event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n"
            return
        if message == "bye":
            events: list[Any] = [{"delta": "Goodbye!"}, {"done": True, "hangup": True}]
        else:
            events = [{"delta": chunk} for chunk in chunks(f"You said {message}")]
            if message == "tools":
                events.insert(0, {"tool_calls": [{"name": "lookup", "args": {"q": "x"}}]})
            if message == "final":
                events.append({"done": True, "text": f"You said {message}"})
            else:
                events.append("[DONE]")
        if message == "bom":
            yield "\ufeff"  # its own piece: the reader must drop it wherever the network splits the stream
        else:
            yield ": a comment line the reader must skip\n\n"
        for event in events:
            await asyncio.sleep(STREAM_PAUSE)
            data = event if isinstance(event, str) else json.dumps(event)
            named = "" if message == "bom" else "event: message\n"  # after a BOM, a data line: the one it spoils
            yield f"{named}data: {data}\n\n"

    async def ndjson(self, request: Request) -> Response:
        message = str((await request.json()).get("message", ""))

        async def lines() -> AsyncIterator[str]:
            for chunk in [*chunks(f"You said {message}"), ""]:
                await asyncio.sleep(STREAM_PAUSE)
                line = {"model": "llama3.2", "created_at": "2026-01-01T00:00:00Z",
                        "message": {"role": "assistant", "content": chunk}, "done": not chunk}
                yield json.dumps(line) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    # -- WS /ws -------------------------------------------------------------------------------------

    async def ws(self, websocket: WebSocket) -> None:
        await websocket.accept()
        key = websocket.headers.get("x-api-key")
        if websocket.query_params.get("greet"):
            await websocket.send_json({"text": "Welcome!"})
        turn = 0
        try:
            while True:
                message = str(json.loads(await websocket.receive_text()).get("message", ""))
                turn += 1
                if message == "close":
                    await websocket.close(code=1011, reason="asked to close")
                    return
                if message == "stall":
                    await websocket.send_json({"delta": "Let me"})
                    continue
                if message == "error":
                    await websocket.send_json({"delta": "Let me"})
                    await websocket.send_json({"type": "error", "message": "tool backend down"})
                if message == "bye":
                    await websocket.send_json({"delta": "Bye"})
                    await websocket.send_json({"done": True, "hangup": True})
                    continue
                for chunk in chunks(f"You said {message}"):
                    await asyncio.sleep(STREAM_PAUSE)
                    await websocket.send_json({"delta": chunk})
                await websocket.send_json({"done": True, "turn": turn, "key": key})
                if message == "remind":
                    await asyncio.sleep(REMIND_PAUSE)
                    await websocket.send_json({"text": "Still there?"})
        except WebSocketDisconnect:
            return

    # -- POST /jobs, GET /jobs/{id} -----------------------------------------------------------------

    async def create_job(self, request: Request) -> Response:
        body = await request.json()
        job = f"job-{next(self._ids)}"
        self.jobs[job] = {"message": str(body.get("message", "")), "polls": 0}
        return JSONResponse({"job": job}, status_code=202)

    async def read_job(self, request: Request) -> Response:
        job = self.jobs.get(request.path_params["job"])
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        if job["message"] == "crash":
            return JSONResponse({"error": "job failed"}, status_code=500)
        job["polls"] += 1
        if job["polls"] <= PENDING_POLLS or job["message"] == "never":
            return JSONResponse({"status": "pending"})
        return JSONResponse({"status": "done", "text": f"Processed: {job['message']}"})

    # -- POST /bot ----------------------------------------------------------------------------------

    async def bot(self, request: Request) -> Response:
        body = await request.json()
        text, callback = str(body.get("text", "")), str(body.get("callback", ""))
        if text == "bye":
            posts: list[dict[str, Any]] = [{"text": "Bye", "end": True}]
        elif text == "silent":
            posts = []
        else:
            posts = [{"text": f"Working on: {text}"}, {"text": f"Done: {text}"}]
        return JSONResponse({"accepted": True}, background=BackgroundTask(self._call_back, callback, posts))

    async def _call_back(self, callback: str, posts: list[dict[str, Any]]) -> None:
        async with httpx.AsyncClient(timeout=5) as client:
            for post in posts:
                await asyncio.sleep(CALLBACK_PAUSE)
                answer = await client.post(callback, json=post)
                self.callback_answers.append(answer.json())

    # -- session.open: /conversations ---------------------------------------------------------------

    async def open_conversation(self, request: Request) -> Response:
        number = next(self._ids)
        conv, token = f"conv-{number}", f"tok-{number}"
        self.conversations[conv] = token
        return JSONResponse({"id": conv, "token": token}, status_code=201)

    async def conversation_message(self, request: Request) -> Response:
        conv = request.path_params["conv"]
        token = self.conversations.get(conv)
        if token is None or request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": "unknown conversation or bad token"}, status_code=401)
        message = str((await request.json()).get("message", ""))
        return JSONResponse({"reply": {"text": f"[{conv}] {message}"}, "conversation": conv})


def app() -> tuple[Starlette, RestAgents]:
    """A fresh app and the state behind it."""
    agents = RestAgents()
    return agents.app(), agents


def serve() -> tuple[ThreadServer, RestAgents]:
    """Start every agent on a free port; `stop()` the server when done (or use it as a context manager)."""
    application, agents = app()
    return ThreadServer(application).start(), agents
