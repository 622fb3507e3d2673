"""Text as a listener hears it: the words of a transcript in one canonical spelling.

Every token keeps the span of the original text it came from, so a match can quote what was heard.
Numbers become runs of single digits, whatever way they were written: "42", "forty two" and "four two" are
all `4 2`, "ORD-1001" and "O R D one zero zero one" are both `ord 1 0 0 1`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {w: n for n, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                       "nine"])}
_TEENS = {w: n for n, w in enumerate(["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                                      "seventeen", "eighteen", "nineteen"], start=10)}
_TENS = {w: n * 10 for n, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                                          "ninety"], start=2)}
_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
             "eighth": 8, "ninth": 9, "tenth": 10}
FILLERS = frozenset({"um", "umm", "uh", "uhh", "uhm", "er", "erm", "ah", "ahh", "hmm", "hm", "mm", "mhm", "eh"})
"""Sounds a speaker makes while thinking: never part of what they said."""
_SUFFIXES = {"st", "nd", "rd", "th"}  # 1st, 2nd: the digits are the number

# a run of digits (with thousands commas or one decimal point), a word (with inner dots or apostrophes:
# p.m., don't), or a symbol that is said as a word
_PIECE = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|[^\W\d_]+(?:['’.][^\W\d_]+)*\.?|[%&$@+]")
_SAID = {"%": "percent", "&": "and", "@": "at", "+": "plus"}


@dataclass(frozen=True)
class Token:
    text: str
    """The canonical word: lower case, no punctuation, one digit per number token."""
    start: int
    end: int
    """The span of the original text it was heard in."""

    @property
    def digit(self) -> bool:
        return self.text.isdigit()

    @property
    def key(self) -> str:
        """What two tokens are compared by: a plural heard as a singular is the same word."""
        text = self.text
        if len(text) > 3 and text.endswith("s") and not text.endswith("ss"):
            return text[:-1]
        return text


def _is_number_word(word: str) -> bool:
    return word in _UNITS or word in _TEENS or word in _TENS or word == "hundred" or word in _SCALES


class _Numbers:
    """Number words read in order into numbers: "forty two" is 42, "one zero zero one" is four numbers (a
    unit after a unit starts a new one), "twenty twenty six" is 20 and 26."""

    def __init__(self) -> None:
        self.done: list[int] = []
        self.total = 0
        self.group: int | None = None
        self.last = ""

    def _flush(self) -> None:
        if self.group is not None or self.total:
            self.done.append(self.total + (self.group or 0))
        self.total, self.group, self.last = 0, None, ""

    def add(self, word: str) -> None:
        joins = self.last in ("hundred", "scale", "and")
        if word in _UNITS:
            if self.last == "tens":
                self.group = (self.group or 0) + _UNITS[word]
                self.last = "unit"
                return
            if not joins:
                self._flush()
            self.group = (self.group or 0) + _UNITS[word]
            self.last = "unit"
        elif word in _TEENS or word in _TENS:
            if not joins:
                self._flush()
            self.group = (self.group or 0) + (_TEENS.get(word) or _TENS[word])
            self.last = "tens" if word in _TENS else "unit"
        elif word == "hundred":
            if self.group is None or self.group >= 100 or self.last == "hundred":
                self._flush()
                self.group = 100
            else:
                self.group *= 100
            self.last = "hundred"
        elif word in _SCALES:
            self.total += (self.group or 1) * _SCALES[word]
            self.group, self.last = None, "scale"
        elif word == "and":
            self.last = "and"

    def numbers(self) -> list[int]:
        self._flush()
        return self.done


def _digits(value: int | str, start: int, end: int) -> list[Token]:
    return [Token(d, start, end) for d in str(value)]


def tokens(text: str) -> list[Token]:
    """The words of `text` as a listener hears them (see the module docstring)."""
    out: list[Token] = []
    run: list[tuple[str, int, int]] = []  # number words waiting to be read as numbers

    def close_run() -> None:
        if not run:
            return
        trailing_and = run[-1][0] == "and"
        words = run[:-1] if trailing_and else run
        reader = _Numbers()
        for word, _, _ in words:
            reader.add(word)
        start, end = words[0][1], words[-1][2]
        for number in reader.numbers():
            out.extend(_digits(number, start, end))
        if trailing_and:
            out.append(Token("and", run[-1][1], run[-1][2]))
        run.clear()

    for match in _PIECE.finditer(text):
        piece, start, end = match.group(0), match.start(), match.end()
        if piece[0].isdigit():
            close_run()
            whole, _, fraction = piece.replace(",", "").partition(".")
            out.extend(_digits(whole, start, end))
            if fraction:
                out.append(Token("point", start, end))
                out.extend(_digits(fraction, start, end))
            continue
        if piece == "$":  # "$42" is said "42 dollars": the word comes after the number, if at all
            close_run()
            continue
        if piece in _SAID:
            close_run()
            out.append(Token(_SAID[piece], start, end))
            continue
        word = re.sub(r"['’.]", "", piece.lower())
        if not word or word in FILLERS:
            continue
        if _is_number_word(word) or (word == "and" and run and run[-1][0] in ("hundred", *_SCALES)):
            run.append((word, start, end))
            continue
        close_run()
        if word in _SUFFIXES and out and out[-1].digit and out[-1].end == start:
            continue  # the "nd" of 2nd
        if word in _ORDINALS:
            out.extend(_digits(_ORDINALS[word], start, end))
            continue
        out.append(Token(word, start, end))
    close_run()
    return _letters_joined(out)


def _letters_joined(found: list[Token]) -> list[Token]:
    """Letters spelled one by one are one word: "O R D" and "O-R-D" are "ord", as "ORD" is."""
    joined: list[Token] = []
    i = 0
    while i < len(found):
        j = i
        while j < len(found) and len(found[j].text) == 1 and found[j].text.isalpha():
            j += 1
        if j - i >= 2:
            joined.append(Token("".join(t.text for t in found[i:j]), found[i].start, found[j - 1].end))
            i = j
        else:
            joined.append(found[i])
            i += 1
    return joined


def spoken(text: str) -> str:
    """`text` normalised for a pattern: canonical words separated by spaces, each number's digits together
    ("Press one for appointments" -> "press 1 for appointments", "ORD-1001" -> "ord 1001"), so `\\d+` finds a
    number however it was written."""
    parts: list[str] = []
    previous: Token | None = None
    for token in tokens(text):
        if previous is not None and token.digit and previous.digit and previous.start == token.start:
            parts[-1] += token.text  # digits of one number as written, or of one run of number words
        else:
            parts.append(token.text)
        previous = token
    return " ".join(parts)
