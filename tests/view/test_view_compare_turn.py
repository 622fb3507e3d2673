"""`tamesu view`'s Compare says a regression's reason as `--baseline` does: a failed check scoped to a turn names
it (`contains (turn 2): expected ...`); read back from the store, the check lost its turn, and the view's line
differed from the console's for the same two runs (and a test's history listed the check with no turn)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import httpx

from view.conftest import stored_run

SUITE = """\
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: hi, say: hello }}, {{ when: bye, say: goodbye }} ] }}
tests:
  - name: t
    scenario: {{ script: [ {{ say: hi }}, {{ say: bye }} ] }}
    assert: [ {{ contains: {word}, on_turn: 2 }} ]
"""


def _run(root: Path, word: str, *extra: str) -> str:
    (root / "s.tamesu.yaml").write_text(SUITE.format(word=word))
    done = stored_run(root, None, *extra)
    return done.stdout + done.stderr


def test_a_regression_of_a_check_on_one_turn_names_the_turn_as_baseline_does(tmp_path: Path, view: Any) -> None:
    _run(tmp_path, "goodbye")
    [before] = list((tmp_path / "out").iterdir())
    console = _run(tmp_path, "farewell", "--baseline", str(before))
    why = 'contains (turn 2): expected the agent to say "farewell"'
    assert f"regression  s/t: was passed, now failed: {why}" in console, console
    served = view(tmp_path)
    page = html.unescape(httpx.get(f"{served.url}/compare", timeout=30).text)
    assert why in page, page
    # the test's history says the turn beside the check too, as every report does
    history = httpx.get(f"{served.url}/test", params={"id": "s/t"}, timeout=30).text
    assert history.count("<code>contains</code> (turn 2)") == 2, history
