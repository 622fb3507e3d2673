"""An assertion's option of the wrong type is said as a suite's own keys say it: what was written, a number YAML
read where text was meant (`contains: 12`), and no union member's name in the path. It was
`contains.str: input should be a valid string`, and `not_contains: [1, 2]` was refused as the whole list, not
at the item."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_SUITE = """\
targets:
  shop: { type: rest, url: "http://127.0.0.1:9/chat", response: { text: $.reply } }
tests:
  - name: t
    target: shop
    scenario: { script: [ { say: hi } ] }
    assert:
      - contains: 12
      - contains: { value: 12 }
      - not_contains: [refund, 2]
      - contains: true
      - turns: { equals: two }
      - regex: 5
"""

_READ = "put it in quotes to keep it as written)"


def test_an_options_wrong_type_says_what_was_written_where(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.yaml").write_text(_SUITE)
    done = tamesu(["validate", "s.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("s.yaml:")]
    assert said == [
        "s.yaml:8:19: tests[0].assert[0].contains: expected text or a list of texts, got 12 "
        f"(read as a number: {_READ}",
        "s.yaml:9:28: tests[0].assert[1].contains.value: expected text or a list of texts, got 12 "
        f"(read as a number: {_READ}",
        f"s.yaml:10:32: tests[0].assert[2].not_contains[1]: input should be a valid string, got 2 (read as a number: "
        f"{_READ}",
        "s.yaml:11:19: tests[0].assert[3].contains: expected text or a list of texts, got true "
        f"(read as a boolean: {_READ}",
        "s.yaml:12:26: tests[0].assert[4].turns.equals: expected a whole number, got 'two'",
        f"s.yaml:13:16: tests[0].assert[5].regex: input should be a valid string, got 5 (read as a number: {_READ}",
    ], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
