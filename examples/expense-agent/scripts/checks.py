"""Script assertions for the expense example (`"type": "script", "use": "scripts:scripts.checks:NAME"`)."""

from __future__ import annotations

from typing import Any


def names_limit(run: Any) -> tuple[bool, str]:
    """The answer names the approval limit given in the assertion's options.metadata.limit."""
    limit = int(run.metadata.get("limit", 10_000))
    shown = f"${limit:,}"
    if shown in run.text:
        return True, f"names {shown}"
    return False, f"does not name {shown}: {run.text[:80]!r}"
