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
