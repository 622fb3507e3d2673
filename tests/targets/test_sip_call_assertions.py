"""The phone call assertions' templates checked where written (their values filled in a call against the example
IVR: test_sip_ivr.py) and their failures' lines. No call is placed: no lane."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tamesu.checks import parse_assertion
from tamesu.checks.base import RunView
from tamesu.conversation import Event
from tamesu.suite.templates import Context


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


async def test_a_call_assertions_failure_quotes_as_other_reasons_quote() -> None:
    # before: Python reprs, the agent sent '1234#', expected '9999' and a pattern's backslash doubled ('^\\.'),
    # where other reasons quote text in double quotes and write a pattern as /…/
    call = [Event(name="sip_dial", at_ms=0), *(Event(name="sip_dtmf", at_ms=i, data={"digit": d})
                                                for i, d in enumerate("1234#")),
            Event(name="sip_transfer", at_ms=9, data={"to": "sip:billing@127.0.0.1"})]
    view = RunView(exchanges=[], metrics={}, captured={}, events=call, tool_calls=[], context=Context(),
                   base_dir=Path.cwd())

    async def reason(entry: dict[str, Any]) -> str:
        verdict = await parse_assertion(entry).check.evaluate(view)
        assert not verdict.passed, verdict
        return verdict.reason

    assert await reason({"dtmf_received": "9999"}) == 'the agent sent "1234#", expected "9999"'
    assert await reason({"dtmf_received": {"matches": r"^\."}}) == r'the agent sent "1234#", which does not match /^\./'
    assert await reason({"transferred_to": r"^sip:sales\b"}) == \
        r"transferred to sip:billing@127.0.0.1, none matches /^sip:sales\b/"
