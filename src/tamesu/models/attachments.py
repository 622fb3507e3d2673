"""Attachments as each provider's content parts, and which files a provider can take at all.

| file                    | openai (chat completions)              | anthropic (messages)                        |
| ----------------------- | -------------------------------------- | ------------------------------------------- |
| image/*                 | `image_url` (a data: URL, or the URL)  | `image` (base64 or url): jpeg, png, gif, webp |
| audio/wav, audio/mpeg   | `input_audio` (bytes only)             | refused                                     |
| application/pdf         | `file` (`file_data`, bytes only)       | `document` (base64 or url)                  |
| text/*, json, yaml, csv | a `text` part: the file's name and text | `document` with a text source (bytes only)  |
| anything else           | `file` (bytes only)                    | refused                                     |

The fake provider takes every file (its rules read the turn's words, where a file shows as `[name]`).
`refusal` says why a provider cannot take a file, so a test case is refused when it loads, not at run time.
"""

from __future__ import annotations

import base64

from tamesu.models.base import MessageFile

_ANTHROPIC_IMAGES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_TEXTUAL = {"application/json", "application/x-yaml", "application/yaml", "application/xml", "text/csv"}


def is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXTUAL


def refusal(provider: str, mime: str, by_url: bool) -> str | None:
    """Why `provider` cannot take a file of this media type (sent as bytes, or as a URL), or None."""
    if provider == "fake":
        return None
    if provider == "openai":
        if mime.startswith("image/"):
            return None
        if by_url:
            return f"openai takes {mime} files as bytes, not as a URL (only images may be URLs)"
        if mime.startswith("audio/") and mime not in _AUDIO:
            return f"openai takes audio as wav or mp3, not {mime}"
        return None
    if provider == "anthropic":
        if mime in _ANTHROPIC_IMAGES or mime == "application/pdf":
            return None
        if mime.startswith("image/"):
            return f"anthropic takes jpeg, png, gif or webp images, not {mime}"
        if is_text(mime):
            return "anthropic takes a text file as bytes, not a URL" if by_url else None
        return f"anthropic takes images, PDF and text files, not {mime}"
    return f"the {provider} provider takes no files"


def _text_of(file: MessageFile) -> str:
    return base64.b64decode(file.data or "").decode("utf-8", errors="replace")


def openai_part(file: MessageFile) -> dict[str, object]:
    data_url = f"data:{file.mime};base64,{file.data}" if file.data is not None else None
    if file.mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": file.url or data_url}}
    if file.mime in _AUDIO and file.data is not None:
        return {"type": "input_audio", "input_audio": {"data": file.data, "format": _AUDIO[file.mime]}}
    if is_text(file.mime) and file.data is not None:
        return {"type": "text", "text": f"[{file.name}]\n{_text_of(file)}"}
    return {"type": "file", "file": {"filename": file.name, "file_data": data_url}}


def anthropic_block(file: MessageFile) -> dict[str, object]:
    if is_text(file.mime) and file.data is not None:
        return {"type": "document", "title": file.name,
                "source": {"type": "text", "media_type": "text/plain", "data": _text_of(file)}}
    kind = "image" if file.mime.startswith("image/") else "document"
    if file.data is None:
        return {"type": kind, "source": {"type": "url", "url": file.url}}
    block: dict[str, object] = {"type": kind, "source": {"type": "base64", "media_type": file.mime, "data": file.data}}
    if kind == "document":
        block["title"] = file.name
    return block
