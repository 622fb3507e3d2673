"""Every YAML and JSONL block of the README and the documentation site validates with `tamesu validate`, so an
example cannot drift from the code. A block whose first line is `# fragment` is not a whole suite on purpose
(docs/contributing.md); a YAML block whose first line is `# tamesu.yaml` is a project file."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from tamesu.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w-]*)[^\n]*\n"
                   r"(?P<body>.*?)^(?P=indent)(?P=fence)\s*$", re.M | re.S)
FRAGMENT = "# fragment"

# The project a JSONL block runs against (`tamesu test -n expense`), as the JSONL page's examples do.
JSONL_PROJECT = """\
targets:
  expense: { type: rest, url: "http://127.0.0.1:9/chat" }
  simulator: { type: rest, url: "http://127.0.0.1:9/simulator" }
models:
  judge: { provider: fake, rules: [ { pass: true } ] }
  simulator: { provider: fake, rules: [] }
"""
SMALL_SUITE = """\
targets:
  shop: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: greets
    target: shop
    scenario: { script: [ { say: "Hello" } ] }
    assert: [ { contains: "Hi" } ]
"""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            lang = match.group("lang").lower()
            if lang not in ("yaml", "yml", "jsonl"):
                continue
            indent = len(match.group("indent"))
            body = "".join(line[indent:] for line in match.group("body").splitlines(keepends=True))
            line = text.count("\n", 0, match.start()) + 2  # the block's first line, as an editor numbers it
            found.append(Block(page, line, "jsonl" if lang == "jsonl" else "yaml", body))
    return found


BLOCKS = blocks()


def test_the_pages_have_blocks_to_check() -> None:
    # the fence pattern finding nothing would make every check below vacuous
    assert len([b for b in BLOCKS if b.lang == "yaml"]) > 25
    assert [b for b in BLOCKS if b.lang == "jsonl"]


def _validate(args: list[str], cwd: Path) -> tuple[int, str]:
    here = Path.cwd()
    os.chdir(cwd)  # a project is found from the working folder too: never this repository's
    try:
        result = CliRunner().invoke(main, ["validate", *args], catch_exceptions=False,
                                    env={"NO_COLOR": "1", "TAMESU_STORE": "off"})
    finally:
        os.chdir(here)
    return result.exit_code, result.output


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.body.startswith(FRAGMENT)], ids=lambda b: b.id)
def test_a_docs_block_validates(block: Block, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    if block.lang == "jsonl":
        (folder / "tamesu.yaml").write_text(JSONL_PROJECT)
        case = folder / "cases.jsonl"
        case.write_text(block.body)
        code, output = _validate([str(case), "-n", "expense", "--config", str(folder / "tamesu.yaml")], tmp_path)
    elif block.body.startswith("# tamesu.yaml"):
        # a project file is read with a suite of its own: validate checks the project through its suites
        (folder / "tamesu.yaml").write_text(block.body)
        (folder / "suites").mkdir()
        (folder / "suites" / "first.yaml").write_text(SMALL_SUITE)
        code, output = _validate(["--config", str(folder / "tamesu.yaml")], folder)
    else:
        (folder / "tamesu.yaml").write_text("suites: [suite.yaml]\n")
        suite = folder / "suite.yaml"
        suite.write_text(block.body)
        code, output = _validate([str(suite)], tmp_path)
    assert code == 0, f"{block.id}: `tamesu validate` exits {code} (mark a partial block `{FRAGMENT}`):\n{output}"


PYTHON_FILE = re.compile(r"\bpython3? (?:-m \S+ )?(?P<path>[\w.-]+(?:/[\w.-]+)+\.py)\b")


def test_every_script_a_page_runs_is_in_the_repository() -> None:
    # `python bench/model_lent.py` was still on the performance page after the script was removed
    missing = [f"{page.relative_to(ROOT)}: python {m.group('path')}" for page in PAGES
               for m in PYTHON_FILE.finditer(page.read_text(encoding="utf-8"))
               if not (ROOT / m.group("path")).is_file()]
    assert sum(1 for page in PAGES for _ in PYTHON_FILE.finditer(page.read_text(encoding="utf-8"))) > 10
    assert not missing, missing
