"""`contains`, `not_contains`, `regex`, `not_regex`: what the agent said, over its whole transcript.

The transcript is every agent turn in scope joined by newlines (`RunView.agent_text`), so `on_turn` narrows
these checks to one turn; a pattern is searched in each turn as its own text first (`^` is a turn's start).
Values may hold templates (`{{captured.eta}}`), filled when the check runs.
The agent's spoken turns (audio targets) are also read as speech (tamesu.speech): a text is said when a
listener would say so ("press 2" heard as "press two"), a pattern matches their words as spoken, unless the
check says `match: exact`; `similarity` (0.8) is the share of a text's words that must be heard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field, field_validator

from tamesu.checks._compare import render_pattern, template_failed, valid_pattern
from tamesu.checks._quote import quote, quote_turns
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import TemplateError
from tamesu.matching import shown
from tamesu.plugins import register
from tamesu.speech.phrase import SIMILARITY, Heard, Match, closest, find, search
from tamesu.suite.schema import SpeechMatch, Strict
from tamesu.types import YamlBool, YamlFloat

_CONTEXT = 40  # characters shown either side of a match in a reason


class TextSpec(Strict):
    value: str | list[str]
    """One string, or several that must all appear (contains) or none of which may appear (not_contains)."""
    ignore_case: YamlBool = False
    match: SpeechMatch = "speech"
    similarity: YamlFloat = Field(SIMILARITY, gt=0, le=1)

    @field_validator("value")
    @classmethod
    def _not_empty(cls, value: str | list[str]) -> str | list[str]:
        # An empty needle is found in every transcript: the check could never fail.
        items = [value] if isinstance(value, str) else value
        if not items or any(not item for item in items):
            raise ValueError("expected non-empty text")
        for item in items:
            # a pattern's flags, as `when:` and `regex` take them: here they are text, so `contains: "(?i)sorry"` failed
            # an agent that said "Sorry" (as its fault) and `not_contains: "(?i)sorry"` passed whatever it said
            if item[:2] == "(?" and (flags := _FLAGS.match(item)) is not None:  # no call for most: planning counts
                raise ValueError(f"{item!r} begins with a pattern's flags, {flags.group(0)}, but contains and "
                                 "not_contains match text as written: write it as regex (not_regex), or as "
                                 f"{{value: {item[flags.end():]!r}, ignore_case: true}}")
        return value


_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")
"""A regular expression's inline flags at the start of a text (`(?i)`, `(?is)`)."""


class PatternSpec(Strict):
    pattern: str
    ignore_case: YamlBool = False
    match: SpeechMatch = "speech"

    @field_validator("pattern")
    @classmethod
    def _valid(cls, value: str) -> str:
        return valid_pattern(value)


@dataclass
class _Found:
    """A pattern's match in the transcript: where (offsets in the joined text) and what it matched."""

    start: int
    end: int
    text: str


@dataclass
class _Hit:
    turn: int | None
    """The turn the match starts in; None when there is no turn text at all."""
    snippet: str


class _Transcript:
    """The agent's text of a run with the turn each character came from, so a hit can name its turn."""

    def __init__(self, run: RunView, speech: bool = True) -> None:
        self.text = run.agent_text()
        self.turn_count = len(run.exchanges)
        self.turn_labelled = run.turn_labelled
        self.turns = [e.agent.text for e in run.exchanges if e.agent.text]
        self.refusals = [f"HTTP {e.agent.status}" + ("" if run.turn_labelled else f" on turn {e.index}")
                         for e in run.exchanges
                         if e.agent.status is not None and e.agent.status >= 400]
        """The turns answered with an HTTP error status: an agent that said nothing because its server refused
        (a wrong token's 401, a 404 from a wrong path) is not one that was silent."""
        self.unread = next((str(e.data["note"]) for e in run.events if e.name == "text_not_found"
                            and isinstance(e.data.get("note"), str)), None)
        """Why the reply's path read nothing in an answer (`response.text ($.replyy) found nothing...`): an agent
        whose text was looked for in the wrong place is not one that was silent either."""
        self.spoken = [Heard(e.index, e.agent.text) for e in run.exchanges if e.agent.spoken and e.agent.text] \
            if speech else []
        """The spoken turns, read as speech too (empty with `match: exact`)."""
        self._spans: list[tuple[int, int, int]] = []  # (start, end, turn) of each turn in `text`
        offset = 0
        for exchange in run.exchanges:
            if exchange.agent.text:
                end = offset + len(exchange.agent.text)
                self._spans.append((offset, end, exchange.index))
                offset = end + 1  # agent_text joins turns with one newline

    def search(self, pattern: re.Pattern[str]) -> _Found | None:
        """The first match in one turn, each turn searched as its own text, so `^` and `$` anchor at a turn's
        start and end (across the joined transcript, `^Sorry` read the first turn only and `done$` the last:
        a later turn that began "Sorry" passed a `not_regex`); then one across turns, as a pattern that spans
        them was always matched."""
        for start, end, _turn in self._spans:
            if (found := pattern.search(self.text[start:end])) is not None:
                return _Found(start + found.start(), start + found.end(), found.group(0))
        found = pattern.search(self.text)
        return _Found(found.start(), found.end(), found.group(0)) if found is not None else None

    def hit(self, start: int, end: int) -> _Hit:
        """The turn a match starts in, and the match with some context from that turn only."""
        first, last, turn = next(
            (span for span in self._spans if span[0] <= start <= span[1]), (0, len(self.text), None)
        )
        left, right = max(first, start - _CONTEXT), min(last, end + _CONTEXT)
        # at a word's edge, as every quote is cut: "…01 (blue sneakers)" read as a number the agent never said
        if left > first and not self.text[left - 1].isspace():
            space = self.text.find(" ", left, start)
            left = space + 1 if space >= 0 else left
        if right < last and not self.text[right].isspace():
            space = self.text.rfind(" ", end, right)
            right = space if space >= 0 else right
        snippet = ("…" if left > first else "") + self.text[left:right] + ("…" if right < last else "")
        return _Hit(turn, snippet.strip())

    def where(self, hit: _Hit) -> str:
        return self.turn(hit.turn) if hit.turn is not None else "the transcript"

    def turn(self, index: int | None) -> str:
        """A turn as a reason names it: "the answer" when the check's label names the turn already
        (`not_contains (turn 2): ...; the answer said: ...`, not "turn 2 said")."""
        return "the answer" if self.turn_labelled or index is None else f"turn {index}"

    def searched(self) -> str:
        """What was searched: `1 turn(s)`, or `the answer` when the label names its turn."""
        return "the answer" if self.turn_labelled else f"{self.turn_count} turn(s)"

    def missing(self, what: str) -> str:
        """Why `what` (a clause: "not found", "none") was not found, as a sentence: "none in 2 turn(s) of agent
        text: ...", or, when there was nothing to search, that the agent said nothing."""
        if self.turn_labelled:  # one turn, which the label names: "not found in the answer: ..."
            if not self.text:
                return f"the agent said nothing{f' (its answer: {self.refusals[0]})' if self.refusals else ''}"
            return f"{what} in the answer: {quote_turns(self.turns)}"
        if not self.text:
            refused = f" (its answers: {', '.join(self.refusals[:3])}{', ...' if len(self.refusals) > 3 else ''})" \
                if self.refusals else ""
            unread = f" ({self.unread})" if self.unread and not refused else ""
            return f"the agent said nothing in {self.turn_count} turn(s){refused}{unread}"
        return f"{what} in {self.turn_count} turn(s) of agent text: {quote_turns(self.turns)}"


def _find(text: str, needle: str, ignore_case: bool) -> int:
    if ignore_case:
        # Not casefold(): it can change lengths (ß -> ss) and the offset must point into `text`.
        match = re.search(re.escape(needle), text, re.IGNORECASE)
        return match.start() if match else -1
    return text.find(needle)


class _TextCheck(Check[TextSpec]):
    Spec = TextSpec
    shorthand = "value"
    spec: TextSpec

    def _values(self) -> list[str]:
        return [self.spec.value] if isinstance(self.spec.value, str) else self.spec.value

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            needles = [run.context.render_text(value) for value in self._values()]
        except TemplateError as exc:
            return template_failed(exc)
        empty = [value for value, needle in zip(self._values(), needles, strict=True) if not needle]
        if empty:
            return Verdict(passed=False, reason=f"cannot check: {shown(empty[0])} rendered to empty text",
                           undecided=True)
        return self._decide(_Transcript(run, self.spec.match == "speech"), needles)

    def _heard(self, transcript: _Transcript, needle: str) -> Match | None:
        return find(needle, transcript.spoken, self.spec.similarity) if transcript.spoken else None

    def _decide(self, transcript: _Transcript, needles: list[str]) -> Verdict:
        raise NotImplementedError


@register("checks", "contains")
class Contains(_TextCheck):
    """Every given text appears somewhere in the agent's turns."""

    key = "contains"

    def _decide(self, transcript: _Transcript, needles: list[str]) -> Verdict:
        missing = [n for n in needles if _find(transcript.text, n, self.spec.ignore_case) < 0]
        heard = {n: m for n in missing if (m := self._heard(transcript, n)) is not None}
        unheard = [n for n in missing if n not in heard]
        if unheard:
            near = closest(unheard[0], transcript.spoken) if transcript.spoken else None
            nearest = f"; closest heard: {quote(near.quote)} ({near.matched} of {near.words} words)" if near else ""
            return Verdict(
                passed=False,
                reason=f"expected the agent to say {shown(unheard[0])}; {transcript.missing('not found')}"
                       f"{nearest}",
            )
        if needles[0] in heard:
            match = heard[needles[0]]
            turn = "" if transcript.turn_labelled else f"turn {match.where}: "
            return Verdict(passed=True, reason=f"found {shown(needles[0])} as speech ({turn}{match.describe()})",
                           evidence=[match.quote])
        first = needles[0]
        start = _find(transcript.text, first, self.spec.ignore_case)
        hit = transcript.hit(start, start + len(first))
        found = shown(first) if len(needles) == 1 else f"all of {shown(needles)}"
        return Verdict(passed=True, reason=f"found {found} ({transcript.where(hit)})",
                       evidence=[hit.snippet])


@register("checks", "not_contains")
class NotContains(_TextCheck):
    """None of the given texts appears in the agent's turns."""

    key = "not_contains"

    def _decide(self, transcript: _Transcript, needles: list[str]) -> Verdict:
        for needle in needles:
            start = _find(transcript.text, needle, self.spec.ignore_case)
            if start >= 0:
                hit = transcript.hit(start, start + len(needle))
                return Verdict(
                    passed=False,
                    reason=f"expected the agent never to say {shown(needle)}; "
                    f"{transcript.where(hit)} said: {quote(hit.snippet)}",
                    evidence=[hit.snippet],
                )
            if (match := self._heard(transcript, needle)) is not None:
                return Verdict(passed=False, reason=f"expected the agent never to say {shown(needle)}; "
                                                    f"{transcript.turn(match.where)} said it aloud: "
                                                    f"{match.describe()}",
                               evidence=[match.quote])
        return Verdict(passed=True, reason=f"none of {shown(needles)} in {transcript.searched()}")


class _PatternCheck(Check[PatternSpec]):
    Spec = PatternSpec
    shorthand = "pattern"
    spec: PatternSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            pattern = render_pattern(run.context, self.spec.pattern, re.IGNORECASE if self.spec.ignore_case else 0)
        except TemplateError as exc:
            return template_failed(exc)
        transcript = _Transcript(run, self.spec.match == "speech")
        found = transcript.search(pattern)
        if found is None and transcript.spoken and (aloud := search(pattern, transcript.spoken)) is not None:
            return self._decide_spoken(transcript.turn(aloud[0].where), *aloud[:2])
        return self._decide(transcript, found)

    def _decide(self, transcript: _Transcript, match: _Found | None) -> Verdict:
        raise NotImplementedError

    def _decide_spoken(self, turn: str, heard: Heard, match: re.Match[str]) -> Verdict:
        """The pattern matched a spoken turn's words only as spoken ("press one" read as "press 1"); `turn`
        names it as the reason says it (`turn 2`, or `the answer` beside a label that names it)."""
        raise NotImplementedError


@register("checks", "regex")
class Regex(_PatternCheck):
    """The pattern matches somewhere in the agent's turns (`re.search`)."""

    key = "regex"

    def _decide(self, transcript: _Transcript, match: _Found | None) -> Verdict:
        if match is None:
            return Verdict(
                passed=False,
                reason=f"expected a match for /{self.spec.pattern}/; {transcript.missing('none')}",
            )
        hit = transcript.hit(match.start, match.end)
        return Verdict(passed=True, reason=f"{transcript.where(hit)} matches: {quote(match.text, 120)}",
                       evidence=[hit.snippet])

    def _decide_spoken(self, turn: str, heard: Heard, match: re.Match[str]) -> Verdict:
        return Verdict(passed=True, reason=f"{turn} matches as spoken ({quote(match.string, 120)}): "
                                           f"{quote(match.group(0), 120)}", evidence=[heard.text])


@register("checks", "not_regex")
class NotRegex(_PatternCheck):
    """The pattern matches nowhere in the agent's turns."""

    key = "not_regex"

    def _decide(self, transcript: _Transcript, match: _Found | None) -> Verdict:
        if match is None:
            return Verdict(passed=True, reason=f"no match for /{self.spec.pattern}/ in {transcript.searched()}")
        hit = transcript.hit(match.start, match.end)
        return Verdict(
            passed=False,
            reason=f"expected no match for /{self.spec.pattern}/; {transcript.where(hit)} has "
            f"{quote(match.text, 120)}",
            evidence=[hit.snippet],
        )

    def _decide_spoken(self, turn: str, heard: Heard, match: re.Match[str]) -> Verdict:
        return Verdict(passed=False, reason=f"expected no match for /{self.spec.pattern}/; {turn} "
                                            f"has {quote(match.group(0), 120)} as spoken ({quote(match.string, 120)})",
                       evidence=[heard.text])
