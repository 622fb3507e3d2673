"""A model's quotes looked up in what it was shown (judges, the simulator audit, the built-in evaluators):
whitespace, case and quote marks do not matter, words do."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tamesu.matching import quoted

_SPACES = re.compile(r"\s+")
# typographic quotes and dashes a model may type where the transcript has plain ones
_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})
_EDGES = " \t\n\"'`.,;:!?…"


@dataclass
class Evidence:
    supported: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)

    @property
    def none_supported(self) -> bool:
        """Quotes were given and not one of them is in the record."""
        return bool(self.unsupported) and not self.supported


def normalised(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_PLAIN).casefold()).strip()


def _core(quote: str) -> str:
    # models wrap quotes in quote marks, end them with "..." or a full stop the transcript line did not have
    return normalised(quote).strip(_EDGES).removesuffix("...").strip(_EDGES)


_ELISION = re.compile(r"\s*(?:\.\.\.|…|\[\.\.\.\])\s*")


def _found(core: str, texts: list[str]) -> bool:
    """In one text, in order: a quote may leave words out with "..." ("Your refund ... was issued")."""
    pieces = [p.strip(_EDGES) for p in _ELISION.split(core)]
    pieces = [p for p in pieces if p]
    if not pieces:
        return False
    for text in texts:
        at = 0
        for piece in pieces:
            at = text.find(piece, at)
            if at < 0:
                break
            at += len(piece)
        else:
            return True
    return False


def check_evidence(quotes: Iterable[str], record: Iterable[str]) -> Evidence:
    """Each quote is supported when it occurs in one of the record's texts (transcript, tool calls, context)."""
    texts = [normalised(text) for text in record if text]
    found = Evidence()
    for quote in quotes:
        (found.supported if _found(_core(quote), texts) else found.unsupported).append(quote)
    return found


QUOTES_NAMED = 3
"""Quotes a reason names of those not found; it says how many more."""
QUOTE_SHOWN = 80
"""Characters of a quote a reason shows: enough to find it in the model's answer, which `result.json` keeps whole."""


def said_quotes(quotes: Sequence[str]) -> str:
    """Quotes as a reason names them, as other reasons quote: each in double quotes on one line, cut with `…`
    inside (`"We refund within the hour", "Your order…" and 2 more`). They were Python reprs cut at 60
    characters, single-quoted or double-quoted as the quote's own marks had it, with `\n` and no `…`."""
    named = ", ".join(quoted(quote, QUOTE_SHOWN) for quote in quotes[:QUOTES_NAMED])
    left = len(quotes) - QUOTES_NAMED
    return named + (f" and {left} more" if left > 0 else "")
