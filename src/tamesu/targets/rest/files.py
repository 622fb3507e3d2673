"""The files a turn carries, as a rest agent gets them: `{{attachments}}` in the body (bytes as base64, or the
URL of a file the agent fetches), or the parts of a `request.multipart` form."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import aiohttp
from multidict import CIMultiDict

from tamesu.conversation import FileRef, UserTurn
from tamesu.errors import InfraError
from tamesu.targets.rest.spec import RequestSpec


def _turn_files(turn: UserTurn) -> list[FileRef]:
    """Its history's files, then its own."""
    return [*(f for m in turn.history for f in m.files), *turn.files]


def _read(files: list[FileRef], what: str) -> list[tuple[str, str, bytes | None, str | None]]:
    """(name, media type, bytes or None, URL or None) of each file; a file that cannot be read is an infra error."""
    read: list[tuple[str, str, bytes | None, str | None]] = []
    for file in files:
        if file.path is None:
            read.append((file.name, file.mime, None, file.uri))
            continue
        try:
            read.append((file.name, file.mime, Path(file.path).read_bytes(), None))
        except OSError as exc:
            raise InfraError(f"{what}: cannot read attachment {file.name}: {exc.strerror or exc}") from exc
    return read


def attachments(turn: UserTurn, what: str) -> list[dict[str, object]]:
    """Every file the turn carries as `{name, media_type, data}` (the bytes, base64), or `{name, media_type,
    url}` for a file the agent fetches."""
    if not turn.files and not turn.history:  # nearly every turn (`{{attachments}}` is made for each one)
        return []
    return [{"name": name, "media_type": mime, "url": url} if content is None else
            {"name": name, "media_type": mime, "data": base64.b64encode(content).decode()}
            for name, mime, content, url in _read(_turn_files(turn), what)]


async def form_body(headers: dict[str, str], body: object, turn: UserTurn, field: str,
                    what: str) -> tuple[CIMultiDict[str], bytes]:
    """The headers and bytes of a multipart/form-data body: each body key a form field (text as is, anything else
    as JSON), each file a file part under `field` (without files, the fields urlencoded, as httpx sends a form).
    A file the agent would fetch by URL is refused when the test loads."""
    # names as browsers and httpx write them (UTF-8, WHATWG's escapes): aiohttp's default quoting sent `reçu.txt`
    # as `re%C3%A7u.txt`, which agents take as written, and failed on a field name beyond ASCII
    form = aiohttp.FormData(quote_fields=False)
    if isinstance(body, dict):
        for key, value in body.items():
            form.add_field(_name(key), value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    for name, mime, content, _ in _read(_turn_files(turn), what):
        if content is not None:
            form.add_field(_name(field), content, filename=_name(name), content_type=mime)
    payload = form()
    sent = CIMultiDict((k, v) for k, v in headers.items() if k.lower() != "content-type")  # the form's boundary
    sent["Content-Type"] = payload.content_type
    collected = _Collected()
    # written into memory through `write`, which every aiohttp 3 has (`Payload.as_bytes` is recent; the floor is
    # 3.10): the body is then sent again as it is on a resend or a 307, as every other body of the rest target
    await payload.write(collected)  # type: ignore[arg-type]  # a writer is anything with `async write(bytes)`
    return sent, b"".join(collected.parts)


_FORM_ESCAPES = str.maketrans({'"': "%22", "\r": "%0D", "\n": "%0A"})


def _name(name: str) -> str:
    """A field's or file's name in a part's header, escaped as the HTML standard's multipart/form-data encoding."""
    return name.translate(_FORM_ESCAPES)


class _Collected:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        self.parts.append(bytes(data))


def file_refusal(request: RequestSpec, file: FileRef, method: str = "POST") -> str | None:
    """The default body carries files (`attachments`), as does a body naming `{{attachments}}` and
    `request.multipart` (bytes only); any other body would drop them, and so would a GET's or HEAD's, which has
    no default body (`method`: "POST" for a websocket, whose messages carry the body)."""
    if request.multipart is not None:
        return f"{file.name}: request.multipart sends a file's bytes, not a URL" if file.path is None else None
    if "body" not in request.model_fields_set and method in ("GET", "HEAD"):
        return (f"{file.name}: a {method} request of this rest target has no body to carry it: set request.body "
                f"(with \"{{{{attachments}}}}\") or request.multipart, or a method that sends a body (POST)")
    if "body" not in request.model_fields_set or request.mentions_attachments():
        return None
    return (f"{file.name}: this rest target's request.body does not send files: add \"{{{{attachments}}}}\" "
            "to it, or set request.multipart")
