"""Small helpers the providers and the model client share: whether a server is this machine, and a server's
words made safe (no key) and short (one line) for an error."""

from __future__ import annotations

import re
from urllib.parse import urlparse

from tamesu import matching


def is_local_url(url: str | None) -> bool:
    """Whether a base_url points at this machine (where servers need no key)."""
    if not url:
        return False
    host = (urlparse(url).hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or host.endswith(".localhost")


_KEYISH = re.compile(r"\b(sk-proj|sk-ant|sk)-[A-Za-z0-9_*.\-]{6,}")


def redact(text: str, secret: str | None) -> str:
    """A server's message without the key: some servers quote it back ("Incorrect API key provided: sk-...")."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return _KEYISH.sub(r"\1-***", text)


def one_line(text: str, limit: int = 300) -> str:
    """A server's words (or an exception's) on one line of an error, cut at a word past `limit`."""
    return matching.one_line(str(text), limit)


def not_a_completion(answer: object, needed: str) -> str:
    """What a 200 answer that is not a completion was, in a few words, for the one-line error."""
    if isinstance(answer, str | bytes):
        text = answer.decode(errors="replace") if isinstance(answer, bytes) else answer
        return f"the body is text: {matching.quoted(text, 80)}" if text.strip() else "the body is empty"
    if isinstance(answer, list):
        return "the body is a JSON array"
    if answer is None:
        return "no body"
    return f"the JSON has no {matching.quoted(needed)}"
