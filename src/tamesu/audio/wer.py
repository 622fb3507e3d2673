"""Word error rate, with the text normalised first so "7pm" and "seven p.m." are the same words."""

from __future__ import annotations

import re

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = [(10**9, "billion"), (10**6, "million"), (1000, "thousand"), (100, "hundred")]


def number_words(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    for size, word in _SCALES:
        if n >= size:
            rest = n % size
            return f"{number_words(n // size)} {word}" + (f" {number_words(rest)}" if rest else "")
    return str(n)


def normalise(text: str) -> list[str]:
    """Lower case, numbers as words (digits split from letters: 7pm is seven pm), no punctuation."""
    text = text.lower().replace("%", " percent ").replace("&", " and ")
    text = re.sub(r"(\d),(\d{3})", r"\1\2", text)
    text = re.sub(r"(\d)([a-z])", r"\1 \2", text)
    text = re.sub(r"\b(a|p)\.m\.", r"\1m", text)
    text = re.sub(r"\d+", lambda m: f" {number_words(int(m.group()))} " if len(m.group()) < 10 else m.group(), text)
    text = re.sub(r"[^a-z0-9' ]+", " ", text).replace("'", "")
    return text.split()


def errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(word edits, reference words): substitutions, insertions and deletions by edit distance."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        current = [i]
        for j, other in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other)))
        previous = current
    return previous[-1], len(ref)


def word_error_rate(pairs: list[tuple[str, str]]) -> float | None:
    """The WER over every (reference, hypothesis) pair: all edits over all reference words."""
    edits = words = 0
    for reference, hypothesis in pairs:
        e, n = errors(reference, hypothesis)
        edits, words = edits + e, words + n
    return None if words == 0 else round(edits / words, 4)
