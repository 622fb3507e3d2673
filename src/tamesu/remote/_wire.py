"""Reading A2A JSON as it crosses the forward proxy, in either protocol version, without parsing it into types.

The proxy relays bytes unchanged, so it only needs to *read* them: which call a request is, the message it
carries, and what came back. Both versions are read by shape rather than by schema: 0.3 tags objects with
`kind` and writes states as `completed`; 1.0 wraps results (`{"task": ...}`, `{"statusUpdate": ...}`) and writes
`TASK_STATE_COMPLETED`. A shape this module does not know reads as nothing, never as an error: recording must not
break the relay.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

SEND_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
CARD_METHODS = frozenset({"GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"})
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json", "/extendedAgentCard", "/v1/card")


class Call(BaseModel):
    """What one request through the proxy is."""

    binding: str
    """jsonrpc or http."""
    version: str
    method: str
    """The JSON-RPC method, or `METHOD path` for HTTP+JSON."""
    message: dict[str, object] | None = None
    """The message sent, when the call sends one (a delegation)."""
    card: bool = False
    """The answer is a card, whose URLs the proxy rewrites."""


def read_call(http_method: str, path: str, body: bytes, a2a_version: str | None) -> Call:
    """`path` is relative to the real agent's origin, as the request named it."""
    parsed = _json(body)
    if http_method == "POST" and isinstance(parsed, dict) and parsed.get("jsonrpc") == "2.0":
        method = str(parsed.get("method") or "")
        raw_params = parsed.get("params")
        params: dict[str, object] = raw_params if isinstance(raw_params, dict) else {}
        version = a2a_version or ("0.3" if "/" in method else "1.0")
        message = params.get("message") if method in SEND_METHODS else None
        return Call(binding="jsonrpc", version=version, method=method,
                    message=message if isinstance(message, dict) else None, card=method in CARD_METHODS)
    version = a2a_version or ("0.3" if "/v1/" in path else "1.0")
    message = None
    if http_method == "POST" and path.endswith((":send", ":stream")) and isinstance(parsed, dict):
        found = parsed.get("message") or parsed.get("request")  # 0.3's proto names the field `request`
        message = found if isinstance(found, dict) else None
    return Call(binding="http", version=version, method=f"{http_method} {path}", message=message,
                card=http_method == "GET" and path.endswith(CARD_PATHS))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return None


def parts_of(parts: object) -> tuple[list[str], list[object]]:
    """(texts, data) of a list of parts: 0.3 `{kind: text, text}` / `{kind: data, data}`, 1.0 `{text}` /
    `{data}`, and 0.3 proto-JSON's `{data: {data: ...}}`."""
    texts: list[str] = []
    data: list[object] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "data" in part:
            value = part["data"]
            if part.get("kind") is None and isinstance(value, dict) and set(value) == {"data"}:
                value = value["data"]
            data.append(value)
        elif isinstance(part.get("file"), dict) or "raw" in part or "url" in part:
            name = part.get("filename") or (part.get("file") or {}).get("name") or "file"
            texts.append(f"[{name}]")
    return texts, data


def state_name(state: object) -> str:
    """`TASK_STATE_INPUT_REQUIRED` and `input-required` both as `input-required`."""
    text = str(state or "").removeprefix("TASK_STATE_").lower().replace("_", "-")
    return "canceled" if text == "cancelled" else text


class Reply:
    """What came back for one message, built up from a JSON-RPC answer, an HTTP+JSON body or the events of a
    stream, read as the a2a target reads a turn: the task's state, its status message, then the text of its
    artifacts (an appended chunk joined as it came: an agent streaming its words cuts them anywhere), or else the
    text of a direct message."""

    def __init__(self) -> None:
        self.state = ""
        self.task_id = ""
        self.context_id = ""
        self._artifacts: dict[str, tuple[str, list[object]]] = {}
        self._status: tuple[list[str], list[object]] = ([], [])
        """The status message of the task as it stands (a later status without one clears it)."""
        self._message: tuple[list[str], list[object]] = ([], [])
        self.error: str | None = None

    @property
    def text(self) -> str:
        if self.error is not None:
            return self.error
        said = [" ".join(self._status[0]), *(text for text, _ in self._artifacts.values())]
        return "\n".join(s for s in said if s) or " ".join(self._message[0])

    @property
    def data(self) -> Any:
        found = [d for _, data in self._artifacts.values() for d in data] or self._status[1] or self._message[1]
        return found[0] if len(found) == 1 else (found or None)

    @property
    def settled(self) -> bool:
        """The caller has its answer: a final or interrupted state, a direct message, or an error."""
        return self.error is not None or self.state in {
            "completed", "failed", "canceled", "rejected", "input-required", "auth-required", "message"}

    def feed_body(self, body: bytes) -> None:
        self.feed(_json(body))

    def feed(self, payload: Any) -> None:
        """One JSON-RPC response, HTTP+JSON body or stream event, of either version."""
        if not isinstance(payload, dict):
            return
        if payload.get("jsonrpc") == "2.0":
            if isinstance(payload.get("error"), dict):
                self.error = str(payload["error"].get("message") or "error")
                self.state = "error"
                return
            payload = payload.get("result")
            if not isinstance(payload, dict):
                return
        elif isinstance(payload.get("error"), dict) and not payload.get("kind"):  # an HTTP+JSON error body
            self.error = str(payload["error"].get("message") or "error")
            self.state = "error"
            return
        for key in ("task", "message", "msg", "statusUpdate", "artifactUpdate"):  # 1.0 and 0.3 proto-JSON
            if isinstance(payload.get(key), dict):
                self._one(key, payload[key])
                return
        kind = {"status-update": "statusUpdate", "artifact-update": "artifactUpdate"}.get(
            str(payload.get("kind")), str(payload.get("kind") or ""))
        if kind in ("task", "message", "statusUpdate", "artifactUpdate"):
            self._one(kind, payload)

    def _one(self, kind: str, body: dict[str, object]) -> None:
        if kind in ("message", "msg"):
            self._message = parts_of(body.get("parts") or body.get("content"))
            self.state = self.state or "message"
            self.context_id = str(body.get("contextId") or self.context_id)
            return
        self.task_id = str(body.get("taskId") or body.get("id") or self.task_id)
        self.context_id = str(body.get("contextId") or self.context_id)
        if kind == "artifactUpdate":
            self._artifact(body.get("artifact"), bool(body.get("append")))
            return
        raw_status = body.get("status")
        status: dict[str, object] = raw_status if isinstance(raw_status, dict) else {}
        if status.get("state"):
            self.state = state_name(status["state"])
        if raw_status is not None:
            message = status.get("message")
            self._status = parts_of(message.get("parts") or message.get("content")) if isinstance(message, dict) \
                else ([], [])
        artifacts = body.get("artifacts") if kind == "task" else None
        for artifact in artifacts if isinstance(artifacts, list) else []:
            self._artifact(artifact, False)

    def _artifact(self, artifact: object, append: bool) -> None:
        if not isinstance(artifact, dict):
            return
        key = str(artifact.get("artifactId") or len(self._artifacts))
        texts, data = parts_of(artifact.get("parts"))
        text = " ".join(texts)
        if append and key in self._artifacts:
            old_text, old_data = self._artifacts[key]
            text, data = old_text + text, old_data + data
        self._artifacts[key] = (text, data)


class SseReader:
    """Splits a relayed event stream into its events' JSON, chunk by chunk (a chunk may hold part of an event,
    or several)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Any]:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        events: list[object] = []
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            lines = [line[5:].removeprefix(b" ") for line in raw.split(b"\n") if line.startswith(b"data:")]
            if lines:
                events.append(_json(b"\n".join(lines)))
        return events


def rewrite_card(card: object, real_origin: str, proxy_origin: str, *,
                 grpc: tuple[str, str] | None = None) -> object:
    """The card with every interface at the real agent moved to the proxy: HTTP ones at `real_origin` to
    `proxy_origin`, and with `grpc` (real host:port, proxy's host:port) the gRPC one naming the real address, in
    whatever form the card writes it (bare, `grpc://`, 0.3's `dns://`). Interfaces elsewhere are dropped: the proxy
    relays one binding, and a caller taking another would go round it (`docs/remote-agents.md`)."""
    if not isinstance(card, dict):
        return card

    def moved(url: object) -> str | None:
        if not isinstance(url, str) or not url:
            return None
        if real_origin and (url == real_origin or url.startswith(real_origin + "/")):
            return proxy_origin + url[len(real_origin):]
        if grpc is not None and (url == grpc[0] or url.endswith("/" + grpc[0])):
            return url.replace(grpc[0], grpc[1])
        return None

    card = dict(card)
    for key in ("supportedInterfaces", "additionalInterfaces"):  # 1.0, 0.3
        if isinstance(card.get(key), list):
            kept = []
            for interface in card[key]:
                url = moved(interface.get("url")) if isinstance(interface, dict) else None
                if url is not None:
                    kept.append({**interface, "url": url})
            card[key] = kept
    if "url" in card:  # 0.3's main URL
        card["url"] = moved(card["url"]) or card["url"]
    return card
