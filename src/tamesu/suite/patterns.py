"""Regular expressions a user writes (assertions, captures), refused when they can run for ever.

Python's `re` backtracks, and while it matches it holds the interpreter: no timeout, no Ctrl-C, no SIGTERM can
stop it. `(a+)+$` against forty `a`s and a `b` (an agent's answer) never ends, and the run with it. The classic
shape of such a pattern, a repeated group that itself repeats, is refused where it is written, and so is a
repeated group whose alternatives read one text two ways (`(b|bb)*`, `_pattern_words`); written possessively
(`a++`) or atomically (`(?>a+)+`), Python 3.11 does not backtrack into it, and it is fine."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator

from tamesu.suite._pattern_words import ambiguous, atom_end, quantifier
from tamesu.suite.templates import TEMPLATE

_NESTED = ("repeats a group that itself repeats: on some texts that takes exponential time, and Python's regular "
           "expressions cannot be stopped then, not even by Ctrl-C: write it without the nesting, or make the inner "
           "repeat possessive (a++) or the group atomic ((?>...))")
_ALTERNATIVES = ("repeats a group that reads some text in more than one way (as `(b|bb)*` reads `bb` as one or two): "
                 "on some texts that takes exponential time, and Python's regular expressions cannot be stopped then, "
                 "not even by Ctrl-C: make its alternatives exclusive, or the repeat possessive (`)*+`) or the group "
                 "atomic ((?>...))")


def runaway(pattern: str) -> str | None:
    """Why `pattern` may backtrack for ever, or None: a repeated group that holds a repeat and nothing it must
    match once (`(a+)+`, `(\\w+\\s?)+`, `(.*)*`; not `(?:[a-z]+\\.)+`, whose `.` splits the repeats), or whose
    alternatives read one text two ways (`(b|bb)*`, `(a|a)*`; not `(a|ab)*`)."""
    found = _runaway_at(pattern)
    return None if found is None else f"`{pattern[:found[0]][-40:]}` {found[1]}"


def _runaway_at(pattern: str) -> tuple[int, str] | None:
    """Where the quantifier of a group that may backtrack for ever ends in `pattern`, and why it may."""
    try:
        flags = re.compile(pattern).flags
    except re.error:
        flags = 0
    stack: list[_Group] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "(":
            body = _group_body(pattern, i)
            if body is None:  # a comment or inline flags, `(?#...)`, `(?i)`: no group
                i = pattern.find(")", i) + 1 or n
                continue
            stack.append(_Group(atomic=pattern.startswith("(?>", i), body=body))
            i = body
            continue
        if ch == ")" and stack:
            group = stack.pop()
            end, unbounded, optional, possessive = quantifier(pattern, i + 1)
            free = not group.atomic and not possessive
            if unbounded and free and group.repeats and not group.anchored:
                return end, _NESTED
            if unbounded and free and ambiguous(pattern[group.body:i], flags):
                return end, _ALTERNATIVES
            if stack:
                outer = stack[-1]
                outer.repeats = outer.repeats or (group.repeats and free) or (unbounded and not possessive)
                outer.anchored = outer.anchored or (group.anchored and not optional)
            i = end
            continue
        if ch == "|" and stack:
            stack[-1].anchored = False  # an alternative need not match what the other does
            i += 1
            continue
        i = atom_end(pattern, i)  # one character, an escape or a class: then its quantifier, if any
        i, unbounded, optional, possessive = quantifier(pattern, i)
        if stack:
            stack[-1].repeats = stack[-1].repeats or (unbounded and not possessive)
            stack[-1].anchored = stack[-1].anchored or not (unbounded or optional)
    return None


def _group_body(pattern: str, i: int) -> int | None:
    """Where a group's body begins, past `(`, `(?:`, `(?P<name>`, `(?<=`...; None for a comment or flags."""
    if not pattern.startswith("(?", i):
        return i + 1
    rest = pattern[i + 2:i + 4]
    if rest[:1] in (":", ">", "=", "!") or rest in ("<=", "<!"):
        return i + 2 + (2 if rest in ("<=", "<!") else 1)
    if rest.startswith("P<"):
        return pattern.find(">", i) + 1 or len(pattern)
    colon, close = pattern.find(":", i), pattern.find(")", i)
    if 0 <= colon < close and rest[:1] != "#":  # `(?i:...)`: flags for the group
        return colon + 1
    return None


class _Group:
    def __init__(self, *, atomic: bool, body: int) -> None:
        self.atomic = atomic
        self.body = body
        """Where its body begins in the pattern."""
        self.repeats = False
        """It holds an unbounded repeat that may backtrack."""
        self.anchored = False
        """It holds something it must match exactly once (a literal, a class), which splits its repeats."""


def checked(pattern: str) -> str:
    """`pattern` when it compiles and cannot run for ever; else ValueError saying why (a suite error)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    if (why := runaway(pattern)) is not None:
        raise ValueError(why)
    return pattern


Pattern = Annotated[str, AfterValidator(checked)]
"""A regular expression a user writes, checked where it is written (a capture's `regex`, a reply's `when`)."""


def runaway_in(value: object, where: str) -> str | None:
    """Where in `value` (a tool call's `args`, a span's `attributes`, a tool result's `when`) a string that
    `matching.args_problem` would try as a full pattern on the agent's text may backtrack for ever, and why; None
    when none may. A template in it stands for a plain word, as it is filled in later."""
    if isinstance(value, Mapping):
        return next((why for key, item in value.items() if (why := runaway_in(item, f"{where}.{key}"))), None)
    if isinstance(value, list):
        return next((why for i, item in enumerate(value) if (why := runaway_in(item, f"{where}[{i}]"))), None)
    if isinstance(value, str):
        pattern = TEMPLATE.sub("x", value)
        try:
            re.compile(pattern)
        except re.error:
            return None  # not a pattern: it only matches an equal value
        if (found := _runaway_at(pattern)) is None:
            return None
        # the quote is of what the user wrote, its templates as written, not of the `x` checked in their place
        return f"{where}: `{value[:_written_end(value, found[0])][-40:]}` {found[1]}"
    return None


def _written_end(value: str, end: int) -> int:
    """Where in `value` the checked pattern's position `end` is (each template there one `x`)."""
    shift = 0
    for match in TEMPLATE.finditer(value):
        if match.start() - shift >= end:
            break
        shift += len(match.group(0)) - 1
    return end + shift
