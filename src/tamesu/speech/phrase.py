"""Whether a phrase was heard in speech, and how.

A phrase of n words is heard when its words occur in order within a span of at most 2n heard words, with a
share of them at least `similarity` (default 0.8: one word in five may be missed or misheard). A number is
never one of the words forgiven: "press 3" is not "press 2". Several utterances are searched as one stream
(an agent that pauses mid-sentence), and a match names the utterance it starts in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tamesu.speech.words import Token, spoken, tokens

SIMILARITY = 0.8
"""One word in five may be missed or misheard."""
_MISSING = -(10**6)
SOUNDS_LIKE = {"0": {"oh", "o"}, "1": {"won"}, "2": {"to", "too"}, "4": {"for", "fore"}, "8": {"ate"}}
"""Words speech-to-text writes for a digit said alone ("press one for appointment to for billing"): a digit of
the phrase is heard in them. Only that way round: "to" in the phrase is never a 2."""


@dataclass(frozen=True)
class Heard:
    """One utterance: where it is (a turn number) and what speech-to-text wrote for it."""

    where: int | None
    text: str


@dataclass(frozen=True)
class Match:
    """How a phrase was found in speech, for a reason line."""

    where: int | None
    """The utterance (turn) the match starts in."""
    quote: str
    """The stretch of the original text that was heard as the phrase."""
    words: int
    matched: int
    how: str
    """`exact`, `normalised` (the same words once normalised) or `similar` (some words missed)."""

    @property
    def score(self) -> float:
        return self.matched / self.words if self.words else 1.0

    def describe(self) -> str:
        # quoted as the checks' reasons quote, on one line: a repr put 'single quotes' (double ones when the
        # words had an apostrophe) and a `\n` where an utterance's words crossed a line break
        heard = "heard " + json.dumps(" ".join(self.quote.split()), ensure_ascii=False)
        if self.how == "exact":
            return heard
        if self.how == "normalised":
            return f"{heard} (the same words spoken)"
        return f"{heard} ({self.matched} of {self.words} words in order)"


@dataclass(frozen=True)
class _Stream:
    tokens: list[Token]
    where: list[int | None]
    origin: list[int]
    """Index of each token's utterance, to quote from its own text."""


def _stream(heard: Sequence[Heard]) -> _Stream:
    found: list[Token] = []
    where: list[int | None] = []
    origin: list[int] = []
    for number, utterance in enumerate(heard):
        for token in tokens(utterance.text):
            found.append(token)
            where.append(utterance.where)
            origin.append(number)
    return _Stream(found, where, origin)


def _same(wanted: Token, heard: Token) -> bool:
    return wanted.key == heard.key or heard.text in SOUNDS_LIKE.get(wanted.text, ())


def _best_in(phrase: list[Token], window: list[Token], strict: bool = True) -> tuple[int, int]:
    """(words of the phrase matched in order, index in `window` of the last heard word needed), with every
    number of the phrase matched; (_MISSING, -1) when a number cannot be. A longest common subsequence in
    which a number of the phrase may not be skipped."""
    n = len(phrase)
    # column[j]: most words of phrase[:j] matched within window[:k], for the k read so far
    column = [0] * (n + 1)
    for j in range(1, n + 1):
        column[j] = column[j - 1] if not (strict and phrase[j - 1].digit) else _MISSING
    best, last = column[n], -1
    for k, heard in enumerate(window):
        previous = column[:]
        for j in range(1, n + 1):
            options = [previous[j]]
            if not (strict and phrase[j - 1].digit):
                options.append(column[j - 1])
            if _same(phrase[j - 1], heard) and previous[j - 1] > _MISSING:
                options.append(previous[j - 1] + 1)
            column[j] = max(options)
        if column[n] > best:
            best, last = column[n], k
    return (best, last) if best > _MISSING // 2 else (_MISSING, -1)


def find(phrase: str, heard: Sequence[Heard], similarity: float = SIMILARITY) -> Match | None:
    """Where `phrase` was heard in `heard` (its best match), or None (see the module docstring)."""
    best = _best(phrase, heard, strict=True)
    if best is None or best.score + 1e-9 < similarity:
        return None
    return best


def closest(phrase: str, heard: Sequence[Heard]) -> Match | None:
    """The best match of `phrase` in `heard`, however poor, a number missed too (None when nothing of it was
    heard): a failure's reason says how near the agent came."""
    return _best(phrase, heard, strict=False)


def _best(phrase: str, heard: Sequence[Heard], strict: bool) -> Match | None:
    for utterance in heard:  # the words exactly as written: nothing to explain
        at = utterance.text.casefold().find(phrase.casefold())
        if phrase.strip() and at >= 0:
            words = len(tokens(phrase))
            return Match(utterance.where, utterance.text[at:at + len(phrase)], words, words, "exact")
    wanted = tokens(phrase)
    if not wanted:
        return None
    stream = _stream(heard)
    span = 2 * len(wanted)
    keys = {w.key for w in wanted} | {w for t in wanted for w in SOUNDS_LIKE.get(t.text, ())}
    best: tuple[int, int, int, int] | None = None  # (matched, -length, -start, end): most words, tightest, first
    for start, token in enumerate(stream.tokens):
        if token.key not in keys:
            continue  # a match starts on a word of the phrase
        matched, last = _best_in(wanted, stream.tokens[start:start + span], strict)
        if matched <= 0:
            continue
        candidate = (matched, -last, -start, start + last)
        if best is None or candidate > best:
            best = candidate
    if best is None:
        return None
    matched, _, minus_start, end = best
    start = -minus_start
    if stream.origin[end] != stream.origin[start]:
        quote = " … ".join(_quote(heard, stream, start, end))
    else:
        quote = heard[stream.origin[start]].text[stream.tokens[start].start:stream.tokens[end].end]
    how = "normalised" if matched == len(wanted) else "similar"
    return Match(stream.where[start], quote, len(wanted), matched, how)


def _quote(heard: Sequence[Heard], stream: _Stream, start: int, end: int) -> list[str]:
    """The matched stretch, one piece per utterance it spans."""
    pieces: list[str] = []
    k = start
    while k <= end:
        origin = stream.origin[k]
        last = k
        while last + 1 <= end and stream.origin[last + 1] == origin:
            last += 1
        pieces.append(heard[origin].text[stream.tokens[k].start:stream.tokens[last].end])
        k = last + 1
    return pieces


def search(pattern: re.Pattern[str], heard: Sequence[Heard]) -> tuple[Heard, re.Match[str], bool] | None:
    """The first utterance `pattern` matches as written, else as spoken (`words.spoken`: "press one" is
    "press 1"); with the match and whether it needed the spoken form."""
    for utterance in heard:
        if (match := pattern.search(utterance.text)) is not None:
            return utterance, match, False
    aloud = re.compile(pattern.pattern, pattern.flags | re.IGNORECASE)  # speech has no letter case
    for utterance in heard:
        if (match := aloud.search(spoken(utterance.text))) is not None:
            return utterance, match, True
    return None
