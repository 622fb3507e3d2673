"""Why a `--cache-only` miss happened, when the cache can tell: its answers were asked by another tamesu.

A new tamesu that rewords a prompt (the judge's, the simulator's) changes every key of that role, so a committed
cache recorded by the old one misses on every call. "record the run once" alone reads as a broken cache; the
entries say which prompt version (and cache format) they were asked with, so the miss can name the difference.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

Recorded = Counter[tuple[str, str, str, object, object]]
"""(provider, model, purpose, format, prompt_version) -> how many entries."""


def scan(folder: Path) -> Recorded:
    """What every readable entry of the cache was asked with; read once, on the first miss of a replay-only run."""
    found: Recorded = Counter()
    for path in folder.glob("*/*.json"):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            request = entry["request"]
            found[(str(entry["provider"]), str(entry.get("model")), str(request["purpose"]), entry.get("format"),
                   request.get("prompt_version"))] += 1
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged entry is said when it is the one looked up, not here
    return found


def other_versions(found: Recorded, provider: str, model: str | None, purpose: str, format_version: int,
                   prompt_version: str | None) -> str | None:
    """The miss's likely cause, when no entry of this model and purpose has this format and prompt version but some
    have others; else None (a plain miss: a question never recorded)."""
    mine = [(fmt, prompt, n) for (pr, mo, pu, fmt, prompt), n in found.items()
            if (pr, mo, pu) == (provider, str(model), purpose)]
    if not mine or any((fmt, prompt) == (format_version, prompt_version) for fmt, prompt, _ in mine):
        return None
    formats = any(fmt != format_version for fmt, _, _ in mine)

    def asked(fmt: object, prompt: object) -> str:
        return (str(prompt) if prompt is not None else "no prompt version") + (f" (cache format {fmt})" if formats
                                                                                else "")

    count = sum(n for _, _, n in mine)
    return (f"its {count} recorded answer{'s' if count != 1 else ''} for {purpose} on this model "
            f"{'were' if count != 1 else 'was'} asked with {', '.join(sorted({asked(f, p) for f, p, _ in mine}))}, "
            f"this tamesu asks with {asked(format_version, prompt_version)} (recorded by another version of tamesu?)")
