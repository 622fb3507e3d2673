"""`cases_file:` of a test: the cases of a CSV or JSON file."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from tamesu.errors import ConfigError
from tamesu.suite.json_text import DECODER, DuplicateKey, duplicates
from tamesu.suite.surrogates import holds_half
from tamesu.suite.yaml_reader import column, read_bounded


class CasesFileError(ValueError):
    """Every problem of a cases file found in one reading, each one line (a ValueError of one is one too)."""

    def __init__(self, messages: list[str], more: int = 0) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages
        self.more = more
        """Problems found beyond those said (a spreadsheet of 10,000 wrong rows is not 10,000 lines)."""


def read_cases(path: Path) -> list[Any]:
    """Cases from a CSV file (header row, a `name` column) or a JSON array of objects with `name`."""
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
    rows: list[dict[str, Any]]
    said: list[tuple[int, str]] = []  # (row, problem): every bad row at once, in the file's order
    if path.suffix.lower() == ".json":
        try:
            data = DECODER.decode(text)
        except DuplicateKey:  # json keeps the last in silence: the case would not be the one written
            raise CasesFileError([f"{path.name}:{text.count(chr(10), 0, at) + 1}:{column(text, at)}: duplicate key "
                                  f"{key!r}" for at, _, key in duplicates(text, 0)]) from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise ValueError(f"{path.name}: nested too deeply to read") from None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise ValueError(f"{path.name} must be a JSON array of objects")
        if "\\u" in text and holds_half(data):  # an internal error when the run wrote it
            raise ValueError(f"{path.name} holds half of a UTF-16 pair without its other half (a \\udXXX escape): "
                             "write the character itself")
        rows = data
    elif path.suffix.lower() == ".csv":
        # Excel writes `;` where the comma is the decimal mark, and spreadsheets export tabs: the delimiter is
        # the one that makes a `name` column of the header
        header = text.splitlines()[0] if text.strip() else ""
        delimiter = next((d for d in ",;\t|" if "name" in next(csv.reader([header], delimiter=d))), ",")
        reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
        if not reader.fieldnames or "name" not in reader.fieldnames:
            raise ValueError(f"{path.name} needs a header row with a name column (its first row: {header[:80]!r})")
        try:
            rows = list(reader)
        except csv.Error as exc:  # a field past csv's limit (128 KiB), a NUL: the line it stopped at
            raise ValueError(f"{path.name} line {reader.line_num + 1}: cannot read the CSV: {exc}") from None
        said = [(number, problem) for number, row in enumerate(rows, start=2)
                if (problem := _row_problem(path.name, number, row, len(reader.fieldnames), delimiter))]
    else:
        raise ValueError(f"{path.name}: cases files are .csv or .json")
    cases = []
    for number, row in enumerate(rows, start=1):
        name = row.get("name")
        if not name or not str(name).strip():
            where = f"row {number + 1}" if path.suffix.lower() == ".csv" else f"item {number}"
            said.append((number + 1, f"{path.name} {where} has no name"))
        if said:  # a file with a wrong row makes no cases: the rest of it is read for its problems only
            continue
        values = {k: v for k, v in row.items() if k not in ("name", "vars")}
        if isinstance(row.get("vars"), dict):
            values.update(row["vars"])
        cases.append(Case(name=str(name), vars=values))
    if not rows:  # the test would run once with no case at all, as if cases_file were not written
        raise ValueError(f"{path.name} has no cases: " + ("an empty array" if path.suffix.lower() == ".json"
                                                           else "a header row and no rows below it"))
    if said:  # bounded: a spreadsheet of 10,000 wrong rows is not 10,000 lines
        raise CasesFileError([problem for _, problem in sorted(said)[:_MAX_SAID]], max(0, len(said) - _MAX_SAID))
    return cases


_MAX_SAID = 20


def _row_problem(name: str, number: int, row: dict[Any, Any], fields: int, delimiter: str) -> str | None:
    if None in row:  # csv's key for the fields past the header's: a comma in a value that needs quotes
        return f"{name} row {number} has more fields than its header ({fields}): quote a value that holds {delimiter!r}"
    if any(value is None for key, value in row.items() if key is not None):
        # fewer fields than the header: the missing ones were sent as `None` (a row cut short)
        return (f"{name} row {number} has fewer fields than its header ({fields}): "
                f"{', '.join(str(k) for k, v in row.items() if v is None)} missing")
    return None
