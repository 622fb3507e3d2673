"""`cases_file:` of a test: the cases of a CSV or JSON file, and where each of their fields is written.

A problem of the file as a whole (not found, not a list, no `name` column) is said where the suite names it; a
problem of one row (a value that breaks it, two cases of one name, a var's bad template) is said at that row and
field in the cases file itself (`cases.csv:3:7: city: ...`), as a suite's own problems are.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tamesu.errors import ConfigError, Problem
from tamesu.suite.json_text import DECODER, DuplicateKey, duplicates, locate, skip, starts
from tamesu.suite.surrogates import holds_half
from tamesu.suite.yaml_reader import format_loc, read_bounded


class CasesFileError(ValueError):
    """Every problem of a cases file's rows found in one reading, each where it is written in the file (a
    ValueError is one problem of the file as a whole)."""

    def __init__(self, problems: list[Problem], rows: CaseRows | None = None) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems
        self.rows = rows
        """The cases of the rows with no problem of their own, checked on for the problems they make together
        (a name two rows share, a var's bad template), so one reading says them all; None: nothing was read."""


@dataclass
class CaseRows:
    """The cases of a cases file, and where each of their rows is written."""

    label: str
    text: str
    csv: bool
    rows: list[dict[Any, Any]] = field(default_factory=list)
    """Each case's row as read: a JSON object, or a CSV row as csv.DictReader makes it."""
    cases: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    """A CSV file's header."""
    delimiter: str = ","
    kept: list[int] | None = None
    """The row of each case when rows with problems of their own made none (None: case `i` is row `i`)."""
    _breaks: list[int] | None = None
    _items: list[int] | None = None
    _spans: list[tuple[int, int]] | None = None

    def problem(self, index: int, key: str | None, message: str) -> Problem:
        """A problem of the case `index` (from 0), at its value `key` (None: at the row)."""
        if self.csv:
            fields = self.fields(index)
            column = self.names.index(key) if key in self.names else len(fields)
            if column < len(fields):
                return self.at(fields[column], key or "", message)
            return self.at(self.span(index)[0], "", message)
        row = self.rows[index]
        nested = isinstance(row.get("vars"), dict) and key in row["vars"]
        loc: tuple[object, ...] = ("vars", key) if nested else () if key is None else (key,)
        return self.at(locate(self.text, self.item(index), loc), format_loc((index, *loc)), message)

    def item(self, index: int) -> int:
        """Where the JSON item `index` starts."""
        if self._items is None:
            self._items = list(starts(self.text, skip(self.text, 0)))
        return self._items[index]

    def row_of(self, case: int) -> int:
        return case if self.kept is None else self.kept[case]

    def span(self, index: int) -> tuple[int, int]:
        """Where the CSV row `index` starts and ends. Found when a problem needs it: the rows are read again,
        record by record (reading them so the first time took twice as long)."""
        if self._spans is None:
            lines = _Lines(self.text)
            read = [(record, lines.record()) for record in _records(lines, self.delimiter)]
            self._spans = [span for record, span in read[1:] if record]  # not the header, nor a blank line
        return self._spans[index]

    def fields(self, index: int) -> list[int]:
        """Where each field of the CSV row `index` starts (a quoted field's delimiters are its own, also after the
        spaces a hand-written `a, "b, c"` puts before it)."""
        return self.starts(*self.span(index))

    def starts(self, start: int, end: int) -> list[int]:
        """Where each field of the CSV record written from `start` to `end` starts."""
        found, quoted, at, lead = [start], False, start, start
        while at < end:
            char = self.text[at]
            if at == lead and char == " ":
                lead += 1  # the spaces before a field's first character, as csv's skipinitialspace skips them
                found[-1] = lead
            if quoted:
                if char == '"':
                    if self.text.startswith('"', at + 1):
                        at += 1  # "" is a quote inside a quoted field
                    else:
                        quoted = False
            elif char == '"' and at == lead:
                quoted = True
            elif char == self.delimiter:
                found.append(at + 1)
                lead = at + 1
            at += 1
        return found

    def at(self, offset: int, path: str, message: str, count: int = 1) -> Problem:
        if self._breaks is None:  # counted once, and only for a file with a problem
            self._breaks = [m.start() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_left(self._breaks, offset)
        start = self._breaks[line - 1] + 1 if line else 0
        return Problem(self.label, line + 1, offset - start + 1, path, message, count)


def read_cases(path: Path) -> list[Any]:
    """Cases from a CSV file (header row, a `name` column) or a JSON array of objects with `name`."""
    return read_case_rows(path, path.name).cases


def read_case_rows(path: Path, label: str) -> CaseRows:
    """The cases of a cases file and where they are written (`label` names the file in its problems). A
    problem of the whole file is a ValueError; the problems of its rows, all at once, a CasesFileError."""
    from tamesu.suite.schema import Case

    try:
        there = path.exists()
    except (OSError, ValueError):  # a name longer than the system allows, a NUL byte
        there = False
    if not there:
        raise ValueError(f"cases file not found: {path.name[:80]}")
    try:
        # a regular file of bounded size: a FIFO or a device given as a cases_file would block or never end
        text = read_bounded(path, path.name)
    except ConfigError as exc:
        raise ValueError(f"cases file {exc.problems[0].message}") from None
    if path.suffix.lower() not in (".csv", ".json"):
        raise ValueError(f"{path.name}: cases files are .csv or .json")
    found = CaseRows(label, text, csv=path.suffix.lower() == ".csv")
    said: list[Problem] = []  # every bad row at once, in the file's order
    if found.csv:
        _read_csv(path, found)
        said = [*_vars_column(found),
                *[problem for index, row in enumerate(found.rows) if (problem := _row_problem(found, index, row))]]
    else:
        found.rows = _read_json(path, found)
        said = [found.problem(index, "name" if "name" in row else None, f"item {index + 1} has no name")
                for index, row in enumerate(found.rows) if not row.get("name") or not str(row["name"]).strip()]
        said += [found.at(locate(found.text, found.item(index), ("vars",)), format_loc((index, "vars")),
                          f"must be an object of vars (name: value), not {type(row['vars']).__name__}")
                 for index, row in enumerate(found.rows) if "vars" in row and not isinstance(row["vars"], dict)]
        # `{"city": "Oslo", "vars": {"city": "Rome"}}`: the one in `vars` was kept in silence
        said += [found.problem(index, key, f"{key!r} is written both beside vars and in it: write it once")
                 for index, row in enumerate(found.rows) if isinstance(row.get("vars"), dict)
                 for key in row["vars"] if key in row and key not in ("name", "vars")]
    if not found.rows:  # the test would run once with no case at all, as if cases_file were not written
        raise ValueError(f"{path.name} has no cases: " + ("a header row and no rows below it" if found.csv
                                                           else "an empty array"))
    if said:  # bounded: a spreadsheet of 10,000 wrong rows is not 10,000 lines
        if len(said) > _MAX_SAID:
            first = said[_MAX_SAID]  # where the problems not said begin; counted in "N problems found"
            more = len(said) - _MAX_SAID
            said = [*said[:_MAX_SAID], Problem(first.file, first.line, first.column, "",
                                               f"{more:,} more problems", count=more)]
        found.kept = [index for index, row in enumerate(found.rows) if not _bad_row(found, index, row)]
    for row in (found.rows if found.kept is None else [found.rows[index] for index in found.kept]):
        values = {k: v for k, v in row.items() if k not in ("name", "vars")}
        if isinstance(row.get("vars"), dict):
            values.update(row["vars"])
        found.cases.append(Case(name=str(row["name"]), vars=values))
    if said:
        raise CasesFileError(said, found)
    return found


def _bad_row(found: CaseRows, index: int, row: dict[Any, Any]) -> bool:
    if found.csv:
        return _row_problem(found, index, row) is not None
    return not row.get("name") or not str(row["name"]).strip()


_MAX_SAID = 20


def _read_json(path: Path, found: CaseRows) -> list[dict[str, Any]]:
    text = found.text
    try:
        data = DECODER.decode(text)
    except DuplicateKey:  # json keeps the last in silence: the case would not be the one written
        raise CasesFileError([found.at(at, format_loc((*where, key)), f"duplicate key {key!r}")
                              for at, where, key in duplicates(text, 0)]) from None
    except json.JSONDecodeError as exc:
        raise CasesFileError([found.at(exc.pos, "", f"not valid JSON: {exc.msg}")]) from None
    except RecursionError:
        raise ValueError(f"{path.name}: nested too deeply to read") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ValueError(f"{path.name} must be a JSON array of objects")
    if "\\u" in text and holds_half(data):  # an internal error when the run wrote it
        raise ValueError(f"{path.name} holds half of a UTF-16 pair without its other half (a \\udXXX escape): "
                         "write the character itself")
    return data


def _read_csv(path: Path, found: CaseRows) -> None:
    """The rows as csv.DictReader makes them (a missing field None, the fields past the header's under None),
    each with where it is written."""
    text = found.text
    # Excel writes `;` where the comma is the decimal mark, and spreadsheets export tabs: the delimiter is
    # the one that makes a `name` column of the header
    header = text.splitlines()[0] if text.strip() else ""
    # a hand-written `name, order, expect`: the spaces after a delimiter are no part of a name or a value (a
    # column ' order' was no var `order`, and `a, "b, c"` three fields); a value that keeps them is quoted
    found.delimiter = next((d for d in ",;\t|" if "name" in next(csv.reader([header], delimiter=d,
                                                                           skipinitialspace=True))), ",")
    reader = csv.DictReader(io.StringIO(text), delimiter=found.delimiter, skipinitialspace=True)
    if not reader.fieldnames or "name" not in reader.fieldnames:
        raise ValueError(f"{path.name} needs a header row with a name column (its first row: {header[:80]!r})")
    found.names = list(reader.fieldnames)
    try:
        found.rows = list(reader)
    except csv.Error as exc:  # a field past csv's limit (128 KiB), a NUL: the record it stopped in
        lines = _Lines(text)
        for _ in _records(lines, found.delimiter):
            lines.record()
        raise CasesFileError([found.at(lines.record()[0], "", f"cannot read the CSV: {exc}")]) from None


def _records(lines: _Lines, delimiter: str) -> Iterator[list[str]]:
    """csv's records of `lines` up to the first it cannot read."""
    with contextlib.suppress(csv.Error):
        yield from csv.reader(lines, delimiter=delimiter, skipinitialspace=True)


class _Lines:
    """A text's lines for csv.reader, which reads no further than the record it returns: `record` is where
    the lines read since it was last called start and end."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = 0
        self._start = 0

    def __iter__(self) -> Iterator[str]:
        while self._at < len(self._text):
            end = self._text.find("\n", self._at)
            end = len(self._text) if end < 0 else end + 1
            line, self._at = self._text[self._at:end], end
            yield line

    def record(self) -> tuple[int, int]:
        """(start, end) of the record last read, its line end left out."""
        start, end = self._start, self._at
        self._start = self._at
        while end > start and self._text[end - 1] in "\r\n":
            end -= 1
        return start, end


def _vars_column(found: CaseRows) -> list[Problem]:
    # a JSON case's `vars` holds its vars; a CSV's columns are its vars: a column `vars` was dropped in silence
    if "vars" not in found.names:
        return []
    header = found.text.split("\n", 1)[0].rstrip("\r")
    at = found.starts(0, len(header))[found.names.index("vars")]
    return [found.at(at, "vars", "`vars` cannot name a column (a JSON case's `vars` holds its vars; a CSV's "
                                 "columns are them): rename it")]


def _row_problem(found: CaseRows, index: int, row: dict[Any, Any]) -> Problem | None:
    number, fields = index + 2, len(found.names)  # a spreadsheet's row number: the header is row 1
    if None in row:  # csv's key for the fields past the header's: a comma in a value that needs quotes
        return found.at(found.fields(index)[fields], "", f"row {number} has more fields than its header "
                        f"({fields}): quote a value that holds {found.delimiter!r}")
    if any(value is None for key, value in row.items() if key is not None):
        # fewer fields than the header: the missing ones were sent as `None` (a row cut short)
        return found.at(found.span(index)[1], "", f"row {number} has fewer fields than its header ({fields}): "
                        f"{', '.join(str(k) for k, v in row.items() if v is None)} missing")
    if not row.get("name") or not str(row["name"]).strip():
        return found.problem(index, "name", f"row {number} has no name")
    return None
