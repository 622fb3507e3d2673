"""How deep a JSON value from a server may nest: Python reads 900 levels, but tamesu's own walks over an answer
(masking, excerpts, checks, pydantic's dump of a record) recurse and stop near 1,000, so a deeper answer would end
the test as a bug of tamesu's instead of the server's fault."""

from __future__ import annotations

MAX_JSON_DEPTH = 200
"""Deeper JSON is no agent's answer."""


def deeper_than(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests lists and mappings more than `limit` levels deep, walked without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in children)
    return False
