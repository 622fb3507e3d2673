"""The key tables the documentation generates from the spec models (scripts/docs_gen.py): every target type has
one on its page, and no row of any generated table (a target's keys, a suite's, tamesu.yaml's, a test's, a
persona's) is without its meaning, so a key added without a description fails here, not in a user's hands."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import docs_gen  # noqa: E402  # scripts/ is no package: the path above makes it importable

from tamesu import targets  # noqa: E402

MARKER = re.compile(r"^<!-- tamesu:(keys|model|schema-keys) ([A-Za-z0-9_.:-]+) -->$", re.M)
CELL = re.compile(r"(?<!\\)\|")


def _markers() -> list[tuple[str, str]]:
    found = {(m.group(1), m.group(2)) for page in (ROOT / "docs").rglob("*.md") if page.parent.name != "contributing"
             for m in MARKER.finditer(page.read_text(encoding="utf-8"))}
    return sorted(found)


def _table(kind: str, arg: str) -> str:
    return {"keys": docs_gen.key_table, "model": docs_gen.model_table, "schema-keys": docs_gen.schema_keys}[kind](arg)


def test_every_target_type_has_its_key_table_in_the_docs() -> None:
    documented = {arg for kind, arg in _markers() if kind == "keys"}
    assert set(targets.known_types()) <= documented, set(targets.known_types()) - documented


@pytest.mark.parametrize(("kind", "arg"), _markers(), ids=lambda v: str(v))
def test_no_generated_key_row_is_without_its_meaning(kind: str, arg: str) -> None:
    rows = [line for line in _table(kind, arg).splitlines() if line.startswith("| `")]
    assert rows, (kind, arg)
    empty = []
    for row in rows:
        cells = [c.strip() for c in CELL.split(row)[1:-1]]
        assert len(cells) == 4, row
        if not cells[3] or not cells[2]:
            empty.append(cells[0])
    assert not empty, f"{kind} {arg}: keys without a description (a docstring under the field, or " \
                      f"Field(description=...)): {', '.join(empty)}"
    # a type a reader can read (`request.body` said "<class 'object'>")
    assert not [row for row in rows if "<class" in row], (kind, arg)


class Sample(BaseModel):
    documented: int = 1
    """Says what it is."""
    bare: str = "x"


def test_a_field_without_a_description_is_caught() -> None:
    """The check above can fail: a model with an undocumented field gives a row with an empty meaning."""
    rows = {CELL.split(row)[1].strip(): CELL.split(row)[4].strip()
            for row in docs_gen.model_table(f"{__name__}:Sample").splitlines() if row.startswith("| `")}
    assert rows == {"`documented`": "Says what it is.", "`bare`": ""}


def test_the_cli_reference_shows_a_count_option_as_a_flag() -> None:
    # `-v, --verbose INTEGER` read as taking a number: `tamesu run --verbose 2` then took 2 for a suite file
    reference = docs_gen.cli_reference()
    assert "`-v`, `--verbose` INTEGER" not in reference and "`-v`, `--verbose` |" in reference


def test_the_cases_file_formats_a_test_s_table_names_are_the_ones_read(tmp_path: Path) -> None:
    # before: "A CSV, JSON, JSONL or YAML file of cases", and cases.yaml was 'cases files are .csv or .json'
    from tamesu.plan.cases import read_cases

    [row] = [row for row in docs_gen.model_table("tamesu.suite.schema:TestSpec").splitlines()
             if row.startswith("| `cases_file` |")]
    written = {"CSV": ("csv", "name,city\nc1,Oslo\n"), "JSON": ("json", '[{"name": "c1", "city": "Oslo"}]'),
               "JSONL": ("jsonl", '{"name": "c1", "city": "Oslo"}\n'), "YAML": ("yaml", "- {name: c1, city: Oslo}\n")}
    named = re.findall(r"\b(CSV|JSONL|JSON|YAML)\b", row)
    assert named, row
    for kind in named:
        suffix, text = written[kind]
        (tmp_path / f"cases.{suffix}").write_text(text)
        assert [case.name for case in read_cases(tmp_path / f"cases.{suffix}")] == ["c1"], (kind, row)
