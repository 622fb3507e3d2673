"""Two defaults of one kind (two `contains` in `defaults.assert`, a project's and a suite's `not_contains`) are
named apart by where each is written, alike on the console, in result.json, JUnit and HTML: before, each was
`defaults/contains`, and which entry of which file failed was the reader's guess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_PROJECT = 'defaults: { assert: [ { not_contains: "Traceback" } ] }\n'
_SUITE = """\
models:
  bot: { provider: fake, rules: [ { say: "Your order ORD-1001 is on its way" } ] }
targets:
  bot: { type: model, model: bot }
defaults:
  assert:
    - contains: "zzz"
    - contains: "ORD-"
    - not_contains: "Error"
    - regex: "order"
tests:
  - name: order
    target: bot
    scenario: { script: [ { say: "where is my order?" } ] }
    assert: [ { contains: "way" } ]
"""


def test_two_defaults_of_one_kind_are_named_apart_in_every_report(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "tamesu.yaml").write_text(_PROJECT)
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "junit:j.xml,html:h.html"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert '✗ defaults[0]/contains: expected the agent to say "zzz"' in done.stdout, done.stdout
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "order" / "run-1" / "result.json").read_text())
    names = ["tamesu.yaml defaults[0]/not_contains", "defaults[0]/contains", "defaults[1]/contains",
             "defaults[2]/not_contains", "defaults/regex", "contains"]  # one of its kind keeps its name
    passed = [True, False, True, True, True, True]
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == list(zip(names, passed, strict=True))
    junit = (tmp_path / "j.xml").read_text()
    assert 'message="defaults[0]/contains: expected the agent to say &quot;zzz&quot;' in junit, junit
    html = (tmp_path / "h.html").read_text()
    for name in names[:4]:
        assert name in html, name
    assert "defaults/contains" not in done.stdout + junit + html


_TWICE = """\
models:
  bot: { provider: fake, rules: [ { say: "Your order ORD-1001 is on its way" } ] }
targets:
  bot: { type: model, model: bot }
tests:
  - name: order
    target: bot
    scenario: { script: [ { say: "where is my order?" } ] }
    assert:
      - contains: "ORD-"
      - contains: "zzz"
      - regex: "order"
      - contains: "way"
        negate: true
      - not_contains: "Error"
        name: clean
      - not_contains: "Traceback"
        name: clean
"""


def test_two_assertions_of_one_kind_in_a_test_are_named_apart_in_every_report(tmp_path: Path, tamesu: Any) -> None:
    """A test's own two `contains` were both `contains` everywhere: which one failed was the reader's guess."""
    (tmp_path / "s.tamesu.yaml").write_text(_TWICE)
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "junit:j.xml,html:h.html"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert '✗ assert[1]/contains: expected the agent to say "zzz"' in done.stdout, done.stdout
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "order" / "run-1" / "result.json").read_text())
    names = ["assert[0]/contains", "assert[1]/contains", "regex", "not contains", "assert[4]/clean",
             "assert[5]/clean"]  # one of its name keeps it (`not contains` is not `contains`)
    passed = [True, False, True, False, True, True]
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == list(zip(names, passed, strict=True))
    junit = (tmp_path / "j.xml").read_text()
    assert 'message="assert[1]/contains: expected the agent to say &quot;zzz&quot;' in junit, junit
    html = (tmp_path / "h.html").read_text()
    for name in ("assert[0]/contains", "assert[1]/contains", "assert[5]/clean"):
        assert name in html, name
