"""`capture`: values taken from the agent's turns as they arrive, for later templates and assertions."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import jsonpath

from tamesu.conversation import AgentTurn, Exchange, Session
from tamesu.errors import TemplateError
from tamesu.roles.extractor import Extractor
from tamesu.speech.words import spoken
from tamesu.suite.schema import CaptureSpec


def _from_regex(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text)
    if match is None:
        return None
    return match.group(1) if match.groups() else match.group(0)


def _from_json_path(path: str, turn: AgentTurn) -> tuple[bool, Any]:
    """(whether the path matched at all, its first value): a JSON null it found is not "nothing"."""
    for document in (turn.response, turn.raw):
        if document is None:
            continue
        found = jsonpath.findall(path, document)
        if found:
            return True, found[0]
    return False, None


async def capture_from(
    turn: AgentTurn, specs: list[CaptureSpec], captured: dict[str, Any], session: Session,
    extractor: Extractor | None = None,
) -> None:
    """Fill every capture this turn has a value for and that no earlier turn set; `extract` asks a model."""
    for spec in specs:
        if spec.name in captured:
            continue
        value: Any = None
        if spec.regex is not None:
            value = _from_regex(spec.regex, turn.text)
            if value is None and turn.spoken:  # "order O R D one zero zero one" read as "order ord 1001"
                value = _from_regex(spec.regex, spoken(turn.text))
        elif spec.json_path is not None:
            value = _from_json_path(spec.json_path, turn)[1]  # a null captures nothing: a later turn may have it
        elif spec.extract is not None and extractor is not None and turn.text:
            value = await extractor.extract(spec.extract, turn.text)
        if value is not None:
            captured[spec.name] = value
            session.event("captured", name=spec.name)


def unfound(specs: list[CaptureSpec], captured: dict[str, Any], session: Session,
            exchanges: Sequence[Exchange]) -> None:
    """A `capture_not_found` event for each capture no agent turn had: a value looked for and not found is said
    in the result, not only by a later template or assertion that happens to read it."""
    for spec in specs if exchanges else []:
        if spec.name not in captured:
            session.event("capture_not_found", name=spec.name, note=_not_found(spec, exchanges))


def _not_found(spec: CaptureSpec, exchanges: Sequence[Exchange]) -> str:
    # written as the checks' reasons write a pattern (/…/) and quote a text: a repr doubled a pattern's backslashes
    turns = len(exchanges)
    if spec.regex is not None:
        how = f"regex /{spec.regex}/"
    elif spec.json_path is not None:
        how = f"json_path {spec.json_path}"
        # an `eta: null` is the agent saying "no value", not a path looking in the wrong place: said apart
        nulls = sum(_from_json_path(spec.json_path, e.agent) == (True, None) for e in exchanges)
        if nulls:
            rest = "" if nulls == turns else " and nothing in the others"
            return (f"capture {spec.name}: {how} found null in {nulls} of {turns} agent turn(s){rest} "
                    "(a null is no captured value)")
    else:
        how = f"extract {json.dumps(' '.join(str(spec.extract).split()), ensure_ascii=False)}"
    return f"capture {spec.name}: {how} found nothing in {turns} agent turn(s)"


def why_unset(exc: TemplateError, specs: list[CaptureSpec], captured: dict[str, Any],
              exchanges: Sequence[Exchange]) -> str:
    """A template's error, with what its capture looked for when it named one no agent turn had: whether the agent
    never said it or the capture looks for the wrong thing is then the reader's to see, on the failure's line."""
    name = exc.expr.partition(".")[2] if exc.expr and exc.expr.startswith("captured.") else None
    spec = next((s for s in specs if s.name == name), None)
    if spec is None or spec.name in captured:
        return str(exc)
    return f"{exc} ({_not_found(spec, exchanges)})"
