"""The phone call assertions' templates checked where written (their values filled in a call against the example
IVR: test_sip_ivr.py). No call is placed: no lane."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def test_an_unfilled_template_in_a_call_assertion_is_refused_where_written(tamesu: Callable, tmp_path: Path) -> None:
    (tmp_path / "calls.tamesu.yaml").write_text("""
targets:
  ivr: { type: sip, to: "sip:agent@127.0.0.1:5099" }
tests:
  - name: echo
    target: ivr
    scenario: { script: [ { dtmf: "9" } ] }
    assert:
      - dtmf_received: "{{vars.code}}"
      - transferred_to: { matches: "^sip:{{vars.dept}}@" }
""", encoding="utf-8")
    done = tamesu(["validate", "calls.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("calls.tamesu.yaml:9:24: tests[0].assert[0].dtmf_received: bad template {{vars.code}}: no var 'code' in "
            "the test, its cases, the suite or the project") in done.stdout + done.stderr
    assert "calls.tamesu.yaml:10:36: tests[0].assert[1].transferred_to.matches: bad template {{vars.dept}}" \
        in done.stdout + done.stderr
