"""What masking secrets in every encoded form costs: `python bench/redactor.py`.

The redactor masks each secret's plain value and its encoded forms (URL-encoded, base64, JSON- and
HTML-escaped) with one regular expression. This measures, in one process, the time to mask one run's
result.json-sized document with the whole set of forms against a redactor that knows only the plain values
(the earlier behaviour), as a ratio: the machine is shared, so a bare time means little.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from tamesu.suite.secrets import Redactor

SECRETS = ["sk-live-4f9a8b7c6d5e4f3a2b1c", "tok en/7+\"q\"ü-4711", "hunter2-password"]


class PlainOnly(Redactor):
    """The plain values alone: what masking cost before the encoded forms."""

    def add(self, value: str) -> None:
        import re

        self._values.add(value)
        self._pattern = re.compile("|".join(re.escape(v) for v in sorted(self._values, key=len, reverse=True)))


def document(turns: int) -> dict[str, Any]:
    """A result.json-like run: turns with raw responses, events and a transcript, no secret in it."""
    return {"turns": [{"user": {"text": f"Where is my order ORD-{i:04d}? It was due yesterday."},
                       "agent": {"text": "Your order is with the carrier and arrives tomorrow before noon. " * 3,
                                 "raw": [{"id": f"evt-{i}-{j}", "kind": "status-update", "final": j == 3,
                                          "status": {"state": "working", "message": "still looking"}}
                                         for j in range(4)]}}
                      for i in range(turns)],
            "events": [{"name": "transport", "at_ms": i * 1.5, "data": {"url": "http://127.0.0.1:8000/chat"}}
                       for i in range(turns * 4)]}


def best_of(redactor: Redactor, value: Any, repeats: int = 15, rounds: int = 20) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(rounds):
            redactor.data(value)
        times.append((time.perf_counter() - started) / rounds)
    return min(times)


def main() -> None:
    every, plain = Redactor(), PlainOnly()
    for secret in SECRETS:
        every.add(secret)
        plain.add(secret)
    forms = len(every._forms)
    print(f"{len(SECRETS)} secrets, {forms} forms in the pattern")
    print("| turns | bytes | plain only (ms) | every form (ms) | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    for turns in (5, 20, 80):
        value = document(turns)
        size = len(json.dumps(value))
        base, full = best_of(plain, value), best_of(every, value)
        ratios.append(full / base)
        print(f"| {turns} | {size} | {base * 1000:.3f} | {full * 1000:.3f} | {full / base:.2f} |")
    print(f"median ratio {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
