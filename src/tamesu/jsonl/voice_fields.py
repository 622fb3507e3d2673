"""JSONL cases that ask for voice (a persona's `voice` or `behaviors`, a `dtmf` digit) against a target
that cannot honour them: each is a warning naming where it is written, never silently dropped.

Where a case may write them: `simulator.metadata`, `simulator.options.metadata`, `options.metadata` (voice,
behaviors, dtmf), and each turn's `options.metadata` (dtmf).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tamesu import targets
from tamesu.jsonl.parser import ParsedCase

_PERSONA_KEYS = ("voice", "behaviors")


def _places(parsed: ParsedCase) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    case = parsed.case
    if case.simulator is not None:
        yield ("simulator", "metadata"), case.simulator.metadata
        if case.simulator.options is not None:
            yield ("simulator", "options", "metadata"), case.simulator.options.metadata
    if case.options is not None:
        yield ("options", "metadata"), case.options.metadata
    for i, turn in enumerate(case.turns):
        if turn.options is not None:
            yield ("turns", i, "options", "metadata"), turn.options.metadata


def warnings(cases: list[ParsedCase], target_name: str, spec: Any) -> list[str]:
    """One line per voice field this target cannot honour, as `file:line:col: path: problem`."""
    kind = getattr(spec, "type", "")
    speaks = targets.has_audio(kind, spec)
    digits = targets.sends_dtmf(kind, spec)
    found: list[str] = []
    for parsed in cases:
        for loc, metadata in _places(parsed):
            for key in metadata:
                if key in _PERSONA_KEYS and not speaks:
                    found.append(str(parsed.doc.problem((*loc, key), f"{kind} target {target_name} has no audio: "
                                                                     f"{key} is not used", key=True)))
                elif key == "dtmf" and not digits:
                    found.append(str(parsed.doc.problem((*loc, key), f"{kind} target {target_name} cannot send "
                                                                     "DTMF digits: dtmf is not sent", key=True)))
    return found
