"""The fallbacks a model or mcp target's turn may fall to, in the order they are tried: the model's own under
`models:` first (its client tries it before giving up), then the target's `fallback` and that model's own."""

from __future__ import annotations

from collections.abc import Sequence

from tamesu.models.base import ModelClient
from tamesu.models.client import ResilientClient


def fallbacks_said(clients: Sequence[tuple[str, ModelClient]]) -> dict[str, object]:
    """The `transport` event's `fallback` (the first tried, None without one) and, when there are more,
    `fallbacks` (all of them, in order): the target's own `fallback` alone named none when the model had one."""
    chain: list[str] = []
    for number, (label, client) in enumerate(clients):
        if number > 0:
            chain.append(label)
        own = client.fallback if isinstance(client, ResilientClient) else None
        while own is not None:
            chain.append(own.label)
            own = own.fallback
    said: dict[str, object] = {"fallback": chain[0] if chain else None}
    if len(chain) > 1:
        said["fallbacks"] = chain
    return said
