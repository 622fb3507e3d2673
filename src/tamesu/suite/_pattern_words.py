"""Whether a repeated group's alternatives can read one text more than one way (`(b|bb)*`: `bb` is one or two).

Under an unbounded repeat every such text doubles the ways a failing match tries, as a nested repeat does. The
group's body is spelled out as the finite set of fixed-length words it matches, each position a set of characters
(a sample of them, tried one by one with `re.fullmatch` on the atom: no matching of our own), and the Sardinas-
Patterson test says whether a text has two readings. Only bodies of plain atoms, groups, alternatives and bounded
repeats are spelled out; anything else (an anchor, a lookaround, a backreference, an inner unbounded repeat, which
`patterns` judges itself) is not, and is not refused here. CPython reads an alternation whose every alternative is
one literal or one class (`\\w|\\d`) as one class, which cannot backtrack: so is it read here."""

from __future__ import annotations

import re
import string

Word = tuple[frozenset[str], ...]

_SAMPLE = frozenset(string.printable) | frozenset("\u00a0éßΩжш٣中")
"""The characters an atom is tried on: ASCII, and a few of other scripts, digits and spaces."""
_MAX_WORDS = 64
_MAX_LENGTH = 24
_CLASSES = frozenset("dDwWsS")
_LETTER_LITERALS = frozenset("ntrfva")
"""`\\n`, `\\t`...: one character each, which CPython folds into a class as any literal."""
_NOT_PLAIN = frozenset("bBAZzGxuUN0123456789g")
"""Escapes that are no one character of the text: anchors, codes spelled in digits, backreferences."""


class _Unsure(Exception):
    """The body holds what is not spelled out: it is not refused."""


def ambiguous(body: str, flags: int) -> bool:
    """Whether the words `body` matches (a repeated group's) read some text in two ways."""
    try:
        words = [word for word in _Reader(body, flags).alternation() if word]
    except _Unsure:
        return False
    return _two_readings(words)


def atom_end(pattern: str, i: int) -> int:
    """Where the atom at `i` ends: one character, an escape or a class."""
    if pattern[i] == "\\":
        return i + 2
    if pattern[i] != "[":
        return i + 1
    i += 1  # a character class: its `*`, `+`, `(` are literal
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def quantifier(pattern: str, at: int) -> tuple[int, bool, bool, bool]:
    """The quantifier at `at`, if any: where it ends, whether it is unbounded (`*`, `+`, `{n,}`), whether it may
    match nothing (`?`, `*`, `{0,...}`), whether it is possessive (a `+` after it)."""
    n = len(pattern)
    if at < n and pattern[at] in "*+?":
        end, unbounded, optional = at + 1, pattern[at] != "?", pattern[at] != "+"
    elif at < n and pattern[at] == "{":
        close = pattern.find("}", at)
        body = pattern[at + 1:close] if close > at else ""
        low, comma, high = body.partition(",")
        if close < 0 or not (low.isdigit() or (comma and not low)) or (high and not high.isdigit()):
            return at, False, False, False  # a `{` that is no quantifier
        end, unbounded, optional = close + 1, bool(comma) and not high, not low or int(low) == 0
    else:
        return at, False, False, False
    possessive = end < n and pattern[end] == "+"
    lazy = end < n and pattern[end] == "?"
    return end + (1 if possessive or lazy else 0), unbounded, optional, possessive


class _Reader:
    def __init__(self, body: str, flags: int) -> None:
        self.text, self.flags, self.at = body, flags, 0
        self.alphabet = _SAMPLE | frozenset(body)

    def alternation(self) -> list[Word]:
        alternatives: list[tuple[list[Word], str | None]] = []
        while True:
            alternatives.append(self.sequence())
            if self.at < len(self.text) and self.text[self.at] == "|":
                self.at += 1
                continue
            break
        singles = [one for _words, one in alternatives]
        if len(singles) > 1 and all(one is not None and _mergeable(one) for one in singles) \
                and len(set(singles)) > 1:
            # CPython reads `\w|\d`, `a|b|[xy]` as one class: one character, one way
            return [(frozenset().union(*(words[0][0] for words, _one in alternatives)),)]
        return _bounded([word for words, _one in alternatives for word in words])

    def sequence(self) -> tuple[list[Word], str | None]:
        """The words of one alternative, and its text when it is one atom with no quantifier."""
        words: list[Word] = [()]
        first, pieces, plain = self.at, 0, True
        while self.at < len(self.text) and self.text[self.at] not in "|)":
            plain = plain and self.text[self.at] != "("
            piece = self.group() if self.text[self.at] == "(" else self.atom()
            end, unbounded, _optional, possessive = quantifier(self.text, self.at)
            if unbounded or possessive:
                raise _Unsure
            if end > self.at:
                piece, plain = _repeated(piece, self.text[self.at:end]), False
            self.at = end
            pieces += 1
            words = _bounded([left + right for left in words for right in piece])
        return words, self.text[first:self.at] if pieces == 1 and plain else None

    def group(self) -> list[Word]:
        text, i = self.text, self.at
        if text.startswith("(?", i):
            kind = text[i + 2:i + 3]
            if kind == "P" and text.startswith("(?P<", i):
                i = text.index(">", i) + 1
            elif kind == ":":
                i += 3
            else:
                raise _Unsure  # a lookaround, an atomic group, a backreference, a condition, scoped flags
        else:
            i += 1
        self.at = i
        words = self.alternation()
        if self.at >= len(text) or text[self.at] != ")":
            raise _Unsure
        self.at += 1
        return words

    def atom(self) -> list[Word]:
        text, i = self.text, self.at
        end = atom_end(text, i)
        atom = text[i:end]
        if atom in ("^", "$") or (atom.startswith("\\") and atom[1:2] in _NOT_PLAIN):
            raise _Unsure
        try:
            chars = frozenset(c for c in self.alphabet if re.fullmatch(atom, c, self.flags))
        except re.error:
            raise _Unsure from None
        self.at = end
        return [(chars,)]


def _mergeable(atom: str) -> bool:
    """One literal or one class CPython folds with the others into one: not `.`, not a negated `[^...]`."""
    if atom.startswith("["):
        return not atom.startswith("[^")
    if atom.startswith("\\"):
        return atom[1:2] in _CLASSES or atom[1:2] in _LETTER_LITERALS or not atom[1:2].isalnum()
    return atom != "."


def _repeated(words: list[Word], quant: str) -> list[Word]:
    """`words` under a bounded quantifier (`?`, `{2}`, `{1,3}`), each count spelled out."""
    base = quant.rstrip("?+") if quant[0] == "{" else quant[0]
    if base == "?":
        low, high = 0, 1
    else:
        lo, comma, hi = base[1:-1].partition(",")
        low = int(lo or 0)
        high = int(hi) if comma else low
    if high > _MAX_LENGTH:
        raise _Unsure
    found: list[Word] = []
    layer: list[Word] = [()]
    for count in range(high + 1):
        if count >= low:
            found.extend(layer)
        layer = _bounded([left + right for left in layer for right in words])
    return _bounded(found)


def _bounded(words: list[Word]) -> list[Word]:
    if len(words) > _MAX_WORDS or any(len(word) > _MAX_LENGTH for word in words):
        raise _Unsure
    return words


def _meet(left: Word, right: Word) -> bool:
    """Some text matches both, as far as the shorter goes."""
    return all(a & b for a, b in zip(left, right, strict=False))


def _two_readings(words: list[Word]) -> bool:
    """Sardinas-Patterson: whether a text is two different sequences of `words`. A dangling suffix is the part
    of one reading's word that the other has not yet covered; each character of the text is in one word of each
    reading, so two readings agree where the sets they put it in meet."""
    dangling: set[Word] = set()
    for i, left in enumerate(words):
        for j, right in enumerate(words):
            if i != j and len(left) <= len(right) and _meet(left, right):
                if len(left) == len(right):
                    return True
                dangling.add(right[len(left):])
    seen: set[Word] = set()
    while dangling - seen:
        suffix = next(iter(dangling - seen))
        seen.add(suffix)
        for word in words:
            if not _meet(suffix, word):
                continue
            if len(suffix) == len(word):
                return True
            dangling.add(word[len(suffix):] if len(suffix) < len(word) else suffix[len(word):])
    return False
