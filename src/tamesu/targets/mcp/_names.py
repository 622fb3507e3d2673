"""Server tool names as every model provider takes them.

MCP allows a tool name of up to 128 of `A-Z a-z 0-9 _ - .` (and servers send others); OpenAI's and Anthropic's
APIs take `^[a-zA-Z0-9_-]{1,64}$` and refuse the whole request otherwise. A host maps the names: so does tamesu,
the model seeing `orders_get` where the server offers `orders.get`, every call, event and assertion keeping the
server's own name."""

from __future__ import annotations

import hashlib
import re

_TAKEN = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_MOST = 64


def model_names(server_names: list[str]) -> dict[str, str]:
    """Each server name -> a name the providers take: itself when it already is one, else its other characters
    as `_`, cut to fit with a short hash of the whole name when too long or when two would be the same."""
    kept = {name for name in server_names if _TAKEN.match(name)}
    out = {name: name for name in kept}
    used = set(kept)
    for name in server_names:
        if name in out:
            continue
        plain = _OTHER.sub("_", name) or "tool"
        if len(plain) > _MOST or plain in used:
            suffix = "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
            plain = plain[:_MOST - len(suffix)] + suffix
        out[name] = plain
        used.add(plain)
    return out
