"""The pages a new user reads first, held to what the code does: the store page's `.gitignore` advice is the
lines `tamesu init` writes (it said to ignore `.tamesu/` whole, which keeps out the schemas the suites' first lines
point editors at and the replay cache CI replays)."""

from __future__ import annotations

import re
from pathlib import Path

from tamesu.cli.scaffold import IGNORED

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_store_pages_gitignore_advice_is_what_init_writes() -> None:
    text = DOCS.joinpath("store.md").read_text(encoding="utf-8")
    advice = re.search(r"keep `([^`]+)` out of version control", text)
    assert advice, "the store page says what of .tamesu/ to keep out of git"
    assert advice.group(1) in IGNORED
    assert "add `.tamesu/` to your `.gitignore`" not in text


def test_the_run_folders_concepts_names_are_the_ones_a_run_makes() -> None:
    # a spoiled run made again with a new seed went into `run-1-rerun-2/`, a folder the page never named
    from tamesu.engine.repeats import run_dir_name

    text = DOCS.joinpath("concepts.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(run-N(?:-\w+-K)?)/`", text))
    made = {"run-N": run_dir_name(3), "run-N-retry-K": run_dir_name(3, attempt=2),
            "run-N-rerun-K": run_dir_name(3, rerun=1)}
    assert named == set(made), named
    for pattern, name in made.items():
        assert pattern.replace("N", "3").replace("K", "1") == name
    leaves = text.split("## What a run leaves behind", 1)[1]
    for file in ("plan.json", "results.jsonl", "run.json", "transcript.json", "result.json", "report.html"):
        assert file in leaves, file


def test_the_repeats_pages_persona_facts_examples_are_read_as_it_says() -> None:
    from tamesu.roles.audit import deterministic_finding

    text = DOCS.joinpath("repeats.md").read_text(encoding="utf-8")
    found = re.search(r"`([^`]+)` against `facts: \{(\w+): ([\w-]+)\}`; a line that does not name the fact, `([^`]+)`",
                      text)
    assert found, "the page shows a line the audit reads as contradicting a fact, and one it does not"
    contradicting, key, value, unnamed = found.groups()

    def said(line: str) -> object:
        return deterministic_finding([{"role": "user", "text": line, "turn": 1, "source": "simulator"}], {key: value})

    assert said(contradicting) is not None
    assert said(unnamed) is None
