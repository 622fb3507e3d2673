"""JSON lines (the JSONL test cases of `tamesu test`) read value by value, each remembering where it was written,
for `file:line:col: path: problem` errors (the walking is `tamesu.suite.json_text`'s)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tamesu.errors import Problem
from tamesu.suite.json_text import DECODER, DuplicateKey, duplicates, end_of, locate, skip, starts
from tamesu.suite.surrogates import LONE_ESCAPE, PROBLEM, holds_half
from tamesu.suite.yaml_reader import column, format_loc


@dataclass
class JsonDocument:
    """One JSON value of a JSONL file; `problem` has the signature of `suite._yaml.Document.problem`, so the
    suite loader's pydantic error wording (`problems_from`) serves both formats."""

    label: str
    text: str
    start: int
    line: int
    """The line of `start`: a problem's line is counted from here, not from the top of the file (from the top,
    once per case, reading 5,000 cases spent half its time counting line ends)."""
    index: int | None = None
    """Its place in a `.json` file's array of cases: its problems' paths begin with it (`[1].input`), as a suite's
    cases file's rows do; a JSONL line's case is its line, its paths its own."""

    def problem(self, loc: Sequence[object], message: str, *, key: bool = False) -> Problem:
        at = max(self.start, locate(self.text, self.start, loc, key=key))
        line = self.line + self.text.count("\n", self.start, at)
        path = format_loc(loc if self.index is None else (self.index, *loc))
        return Problem(self.label, line, column(self.text, at), path, message)


class _Lines:
    """The line and column of offsets met in order through one text, each line end counted once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.line = 1

    def __call__(self, offset: int) -> tuple[int, int]:
        offset = max(0, min(offset, len(self.text)))
        if offset >= self.at:
            self.line += self.text.count("\n", self.at, offset)
        else:
            self.line -= self.text.count("\n", offset, self.at)
        self.at = offset
        return self.line, column(self.text, offset)


def values(text: str, label: str) -> Iterator[tuple[Any, JsonDocument] | Problem]:
    """Every JSON value of a JSONL text with its document, or a Problem for text that is not JSON.

    One object per line is the format; an object over several lines is read too, and an array of them (a `.json`
    file of cases) is its objects; lines that start with `#` or `//` are comments. After a syntax error reading
    resumes at the next line that starts with `{`, so one bad line does not hide the problems of the others.
    """
    pos = 0
    line_col = _Lines(text)
    while True:
        pos = skip(text, pos)
        if pos >= len(text):
            return
        if text.startswith(("#", "//"), pos):
            pos = _next_line(text, pos)
            continue
        try:
            value, end = DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            at, note = _where_it_broke(text, exc.pos, pos)
            line, col = line_col(at)
            yield Problem(label, line, col, "", f"not valid JSON: {exc.msg}{note}")
            pos = _next_object(text, pos)
            continue
        except DuplicateKey:  # json keeps the last in silence: the case would not be the one written
            for at, path, key in duplicates(text, pos):  # in a .json file's array, from its case's index
                yield Problem(label, *line_col(at), format_loc(path), f"duplicate key {key!r}")
            pos = end_of(text, pos)
            continue
        except (RecursionError, ValueError) as exc:  # nesting, or an integer of thousands of digits
            line, col = line_col(pos)
            why = "nested too deeply to read" if isinstance(exc, RecursionError) else f"cannot read a value: {exc}"
            yield Problem(label, line, col, "", why[:200])
            pos = _next_object(text, pos)
            continue
        if "\\u" in text[pos:end] and (lone := LONE_ESCAPE.search(text, pos, end)) is not None and holds_half(value):
            line, col = line_col(lone.start())  # it was "internal error: UnicodeEncodeError" when the case ran
            yield Problem(label, line, col, "", f"{lone.group(0)} {PROBLEM}")
            pos = end
            continue
        # a .json file of cases, `[{...}, {...}]`: each case where it is written
        if isinstance(value, list):
            for index, (at, case) in enumerate(zip(starts(text, pos), value, strict=True)):
                yield case, JsonDocument(label, text, at, line_col(at)[0], index)
        else:
            yield value, JsonDocument(label, text, pos, line_col(pos)[0])
        pos = end


def _where_it_broke(text: str, at: int, start: int) -> tuple[int, str]:
    """Where to report a syntax error found at `at` in a value begun at `start`: the decoder skips line ends
    inside a value, so an object left open at the end of its line fails on the next line's first character; the
    line at fault is the one that ended too soon, reported just after its last character. A line that is no JSON
    at all fails where it starts: it is reported there."""
    if at <= start:
        return at, ""
    end = at
    while end > 0 and text[end - 1] in " \t\r\n":
        end -= 1
    if at >= len(text.rstrip()) and at > 0:
        return end, " (the file ends before the value does)"
    if text.find("\n", end, at) < 0:
        return at, ""
    return end, " (the line ends before the value does)"


def _next_line(text: str, pos: int) -> int:
    newline = text.find("\n", pos)
    return len(text) if newline < 0 else newline + 1


def _next_object(text: str, pos: int) -> int:
    pos = _next_line(text, pos)
    while pos < len(text) and not text.startswith("{", pos):
        pos = _next_line(text, pos)
    return pos
