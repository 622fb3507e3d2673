"""Local model servers for tests: one OpenAI-compatible, one Anthropic-shaped, both scriptable.

- `OpenAIServer`: `POST /v1/chat/completions` and `GET /v1/models`, answering in the chat-completions shape
  (point an OpenAI client's base_url at `server.base_url`, which ends in `/v1`).
- `AnthropicServer`: `POST /v1/messages` and `GET /v1/models`, answering in the Messages shape (its base_url
  is the bare host, as the Anthropic SDK adds `/v1/messages` itself).

Each server answers from a queue of planned answers, first in first out, then with a default answer once the
queue is empty: a JSON verdict when the request asks for JSON (a `response_format`, or a system prompt that
mentions a JSON schema), otherwise an echo of the last user message. Planned answers:

    server.plan(text("hello"))                       # an assistant message
    server.plan(tool_call("lookup", {"id": 7}))      # a tool call (several: tool_calls([...]))
    server.plan(tool_call("lookup", '{"id": 7'))     # ... whose arguments are written as given (broken JSON)
    server.plan(text('{"pass": tru'))                # malformed JSON is just text
    server.plan(status(429, "slow down", retry_after="0"))   # an error, with a Retry-After header
    server.plan(status(500, "boom"))
    server.plan(delay(2.0))                          # wait, then answer with the next planned (or default);
                                                     # a caller gone before then takes nothing from the plan
    server.plan(reasoned("ok", "the user wants..."))  # an answer with the model's reasoning in a field of its
                                                     # own (OpenAI: reasoning_content; Anthropic: a thinking
                                                     # block); stop="length" cuts it at the token limit
    server.plan(status(400, "...", when="response_format"))  # only if the body has that key, else skipped
    server.plan(raw("<html>hi</html>", "text/html"))    # HTTP 200 with a body that is not a completion
    server.plan(raw({"id": "x", "object": "list"}))     # ... or JSON in another shape

`OpenAIServer(strict_tools=True)` refuses a tool schema OpenAI's API refuses (not an object's, or an object's
without `properties`) with its 400. `require_key` makes the server answer 401 to any other key, quoting the wrong
key back as some servers do (so tests can check tamesu never repeats it). Every request is recorded
(`server.requests`: path, JSON body, lower-cased headers). Token usage is deterministic: words in the request
and in the answer.

Serve with `tamesu.net.serve.ThreadServer(server.app)` (or the `serve` fixture) and read `server.base_url(url)`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

DEFAULT_VERDICT = {"pass": True, "score": 1, "reason": "the test server's default verdict", "evidence": []}


@dataclass
class Planned:
    """One planned answer. `kind`: text | tools | status | delay | raw."""

    kind: str
    text: str = ""
    calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    """Each call's name and arguments: a str is sent as written (a model's broken JSON), anything else as JSON."""
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    when: str | None = None
    """Only for a request whose JSON body has this top-level key; otherwise the plan skips this answer."""
    usage: tuple[int, int] | None = None
    body: Any = None
    """raw: the whole 200 body (a str is sent as is, anything else as JSON)."""
    content_type: str = "application/json"
    reasoning: str = ""
    """The model's reasoning, sent apart from the text (`reasoned`)."""
    stop: str | None = None
    """Why the answer ended, when not the usual: "length" (OpenAI) / "max_tokens" (Anthropic) for "length"."""


def text(value: str, usage: tuple[int, int] | None = None, stop: str | None = None) -> Planned:
    return Planned("text", text=value, usage=usage, stop=stop)


def reasoned(value: str, reasoning: str, stop: str | None = None) -> Planned:
    return Planned("text", text=value, reasoning=reasoning, stop=stop)


def tool_call(name: str, arguments: dict[str, Any] | str, text: str = "") -> Planned:
    return Planned("tools", text=text, calls=[(name, arguments)])


def tool_calls(calls: list[tuple[str, dict[str, Any] | str]], text: str = "") -> Planned:
    return Planned("tools", text=text, calls=calls)


def status(code: int, message: str, retry_after: str | None = None, when: str | None = None) -> Planned:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Planned("status", status=code, message=message, headers=headers, when=when)


def raw(body: Any, content_type: str = "application/json") -> Planned:
    return Planned("raw", body=body, content_type=content_type)


def delay(seconds: float) -> Planned:
    return Planned("delay", seconds=seconds)


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)
    query: dict[str, str] = field(default_factory=dict)
    """When the request arrived (monotonic seconds), to measure the waits between retries."""


async def _held(request: Request, seconds: float) -> bool:
    """Waits `seconds`; False, at once, when the caller has gone before they passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await request.is_disconnected():
            return False
        await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return True


class _ScriptedServer:
    """What both servers share: the plan, the record, the key check and the default answer."""

    def __init__(self, require_key: str | None = None) -> None:
        self.require_key = require_key
        self.requests: list[Recorded] = []
        self._plan: deque[Planned] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.app = Starlette(routes=[
            Route(self.completion_path, self._complete, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ])

    completion_path = ""

    def plan(self, *answers: Planned) -> None:
        with self._lock:
            self._plan.extend(answers)

    @property
    def pending(self) -> int:
        return len(self._plan)

    def calls(self) -> list[Recorded]:
        """The recorded completion requests (not the model-list GETs)."""
        return [r for r in self.requests if r.path == self.completion_path]

    def _next(self, body: dict[str, Any]) -> Planned | None:
        with self._lock:
            while self._plan:
                planned = self._plan.popleft()
                if planned.when is None or planned.when in body:
                    return planned
            return None

    async def _models(self, request: Request) -> Response:
        self.requests.append(Recorded(request.url.path, {}, dict(request.headers)))
        if (refused := self._refuse(request)) is not None:
            return refused
        return JSONResponse({"object": "list", "data": [{"id": "test-model", "object": "model"}]})

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Recorded(request.url.path, body, dict(request.headers),
                                      query=dict(request.query_params)))
        if (refused := self._refuse(request)) is not None:
            return refused
        if (refused := self.refuse_body(body)) is not None:
            return refused
        planned = self._next(body)
        while planned is not None and planned.kind == "delay":
            if not await _held(request, planned.seconds):
                # the caller gave up: nothing is answered, and the answer planned next stays for the next
                # request (the retry), which a held request took when its wait ended before the retry came
                return Response(status_code=499)
            planned = self._next(body)
        if planned is not None and planned.kind == "status":
            return self.error(planned.status, planned.message, planned.headers)
        if planned is not None and planned.kind == "raw":
            content = planned.body if isinstance(planned.body, str) else json.dumps(planned.body)
            return Response(content, status_code=200, media_type=planned.content_type)
        if planned is None:
            planned = text(self.default_text(body))
        return JSONResponse(self.answer(body, planned))

    def _refuse(self, request: Request) -> Response | None:
        if self.require_key is None:
            return None
        given = self.given_key(request)
        if given == self.require_key:
            return None
        return self.error(401, f"Incorrect API key provided: {given}. Find your key in your account.", {})

    def default_text(self, body: dict[str, Any]) -> str:
        if self.wants_json(body):
            return json.dumps(DEFAULT_VERDICT)
        return f"echo: {self.last_user_text(body)}"

    @staticmethod
    def words(value: Any) -> int:
        return len(json.dumps(value).split()) if not isinstance(value, str) else len(value.split())

    def refuse_body(self, body: dict[str, Any]) -> Response | None:
        """An answer refusing what the request asks, as the real API would (None: nothing refused)."""
        return None

    # the shape of each API
    def given_key(self, request: Request) -> str: ...
    def wants_json(self, body: dict[str, Any]) -> bool: ...
    def last_user_text(self, body: dict[str, Any]) -> str: ...
    def answer(self, body: dict[str, Any], planned: Planned) -> dict[str, Any]: ...
    def error(self, code: int, message: str, headers: dict[str, str]) -> Response: ...


EMBEDDING_TOPICS = (("refund", "refunded", "money", "reimburse"),
                    ("ship", "shipped", "deliver", "delivered", "arrives"), ("hello", "hi", "welcome"))
"""The OpenAI-shaped server's embeddings: one number per topic, how many of the text's words are the topic's, and a
last one of 0.1 so that no vector is zero. Texts on the same topics are near, whatever else they say."""


def embedding_of(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    return [float(sum(word in topic for word in words)) for topic in EMBEDDING_TOPICS] + [0.1]


class OpenAIServer(_ScriptedServer):
    completion_path = "/v1/chat/completions"

    def __init__(self, require_key: str | None = None, strict_tools: bool = False) -> None:
        super().__init__(require_key)
        self.strict_tools = strict_tools
        """Refuse a tool whose parameters OpenAI's API refuses (HTTP 400, its own words): a root schema that is not
        an object's, or an object's without `properties` (`{"type": "object"}`, as many MCP servers list a tool
        without arguments)."""
        self.app.router.routes.append(Route("/v1/embeddings", self._embeddings, methods=["POST"]))

    def refuse_body(self, body: dict[str, Any]) -> Response | None:
        if not self.strict_tools:
            return None
        for number, tool in enumerate(body.get("tools") or []):
            function = tool.get("function", {})
            schema, name = function.get("parameters", {}), function.get("name")
            if schema.get("type") != "object":
                problem = f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{schema.get('type')}\"'."
            elif "properties" not in schema:
                problem = "In context=(), object schema missing properties."
            else:
                continue
            return JSONResponse({"error": {"message": f"Invalid schema for function '{name}': {problem}",
                                           "type": "invalid_request_error",
                                           "param": f"tools[{number}].function.parameters",
                                           "code": "invalid_function_parameters"}}, status_code=400)
        return None

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Recorded(request.url.path, body, dict(request.headers)))
        if (refused := self._refuse(request)) is not None:
            return refused
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = [embedding_of(text) for text in texts]
        # the SDK asks for base64 (little-endian float32) unless told otherwise, and decodes it itself
        encoded: list[Any] = vectors if body.get("encoding_format") != "base64" else [
            base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
        used = sum(len(text.split()) for text in texts)
        return JSONResponse({"object": "list", "model": body.get("model", "test-embedding"), "data": [
            {"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(encoded)],
            "usage": {"prompt_tokens": used, "total_tokens": used}})

    def embedding_calls(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/embeddings"]

    @staticmethod
    def base_url(url: str) -> str:
        return f"{url}/v1"

    def given_key(self, request: Request) -> str:
        return request.headers.get("authorization", "").removeprefix("Bearer ")

    def wants_json(self, body: dict[str, Any]) -> bool:
        return "response_format" in body

    def last_user_text(self, body: dict[str, Any]) -> str:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return str(users[-1].get("content", "")) if users else ""

    def answer(self, body: dict[str, Any], planned: Planned) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": planned.text or None}
        if planned.reasoning:  # as vLLM and llama.cpp send it
            message["reasoning_content"] = planned.reasoning
        if planned.calls:
            message["tool_calls"] = [
                {"id": f"call_{next(self._ids)}", "type": "function",
                 "function": {"name": name,
                              "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}
                for name, arguments in planned.calls]
        prompt, completion = planned.usage or (self.words(body.get("messages", [])),
                                               max(self.words(planned.text), 1))
        return {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "test-model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": planned.stop or ("tool_calls" if planned.calls else "stop")}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }

    def error(self, code: int, message: str, headers: dict[str, str]) -> Response:
        kind = {400: "invalid_request_error", 401: "invalid_api_key",
                429: "rate_limit_exceeded"}.get(code, "server_error")
        return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": kind}},
                            status_code=code, headers=headers)


class AnthropicServer(_ScriptedServer):
    completion_path = "/v1/messages"

    @staticmethod
    def base_url(url: str) -> str:
        return url

    def given_key(self, request: Request) -> str:
        # the 2.x SDK sends its key as a bearer token; older clients use x-api-key
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        return request.headers.get("x-api-key") or bearer

    def wants_json(self, body: dict[str, Any]) -> bool:
        return "json schema" in str(body.get("system", "")).lower()

    def last_user_text(self, body: dict[str, Any]) -> str:
        for message in reversed(body.get("messages", [])):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(b.get("text", "") for b in content if b.get("type") == "text")
        return ""

    def answer(self, body: dict[str, Any], planned: Planned) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": planned.text}] if planned.text else []
        if planned.reasoning:
            content.insert(0, {"type": "thinking", "thinking": planned.reasoning, "signature": "local"})
        content += [{"type": "tool_use", "id": f"toolu_{next(self._ids)}", "name": name, "input": arguments}
                    for name, arguments in planned.calls]
        asked = self.words(body.get("messages", [])) + self.words(body.get("system", ""))
        prompt, completion = planned.usage or (asked, max(self.words(planned.text), 1))
        return {
            "id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant",
            "model": body.get("model", "test-model"), "content": content,
            "stop_reason": {"length": "max_tokens"}.get(planned.stop or "", planned.stop)
                           or ("tool_use" if planned.calls else "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": completion},
        }

    def error(self, code: int, message: str, headers: dict[str, str]) -> Response:
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(code, "api_error")
        return JSONResponse({"type": "error", "error": {"type": kind, "message": message}},
                            status_code=code, headers=headers)


class AzureServer(OpenAIServer):
    """Azure OpenAI's shape of the same API: `POST /openai/deployments/{deployment}/chat/completions
    ?api-version=...`, the key in an `api-key` header; a request without an api-version is a 404, as Azure's."""

    completion_path = "/openai/deployments/{deployment}/chat/completions"

    @staticmethod
    def base_url(url: str) -> str:
        return url  # the resource's endpoint: the SDK adds /openai/deployments/...

    def calls(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.startswith("/openai/deployments/")]

    def given_key(self, request: Request) -> str:
        return request.headers.get("api-key", "")

    def _refuse(self, request: Request) -> Response | None:
        if "api-version" not in request.query_params:
            return self.error(404, "Resource not found", {})
        return super()._refuse(request)

