"""A user's regular expression that can backtrack for ever is refused where it is written: Python's `re` holds the
interpreter while it matches, so `(a+)+$` against forty `a`s and a `b` hung a run past its test's timeout and
past SIGTERM (only SIGKILL ended it). The classic shape is refused; patterns that merely look alike are not."""

from __future__ import annotations

import pytest

from tamesu.suite.patterns import runaway

RUNAWAY = [r"(a+)+$", r"(a*)*", r"(\w+\s?)+", r"(a{2,})+", r"(a+)*?", r"(.*)*", r"(\s*\w+)*$", r"(a|a+)+",
           r"(?:\w+)+@", r"(?i)(a+)+", r"(?#note)(x+)+", r"(?i:a+)+"]
FINE = [r"(?:ab+)*c", r"(?>a+)+", r"(a++)+", r"([a-z]+)", r"[(a+)+]", r"a+b+", r"(a|b)+", r"(a{1,3})+",
        r"((ab)+c)+", r"\(a+\)+", r"ORD-\d+", r"(\d{3})-(\d+)", r"^(?:[a-z]+\.)+[a-z]+$", r"x*", r"([^)]+)",
        r"(?i)hello", r"(?P<x>\d+)-(?P=x)", r"(?<=a)b+"]


@pytest.mark.parametrize("pattern", RUNAWAY)
def test_a_repeated_group_that_repeats_with_nothing_to_split_it_is_refused(pattern: str) -> None:
    assert runaway(pattern) is not None


@pytest.mark.parametrize("pattern", FINE)
def test_a_pattern_that_only_looks_alike_is_kept(pattern: str) -> None:
    assert runaway(pattern) is None


def test_the_refused_ones_are_refused_where_written(tmp_path, tamesu) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "suite.yaml").write_text("""\
models: { bot: { provider: fake, rules: [ { when: hi, say: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab" } ] } }
targets: { shop: { type: model, model: bot } }
tests:
  - name: a
    timeout: 2s
    scenario: { script: [ { say: hi } ] }
    assert: [ { regex: "(a+)+$" } ]
    capture: [ { name: x, regex: '(\\w+\\s?)+' } ]
""")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path, timeout=30)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 2, said
    assert "suite.yaml:7:24: tests[0].assert[0].regex: `(a+)+` repeats a group that itself repeats" in said, said
    assert "tests[0].capture[0].regex: `(\\w+\\s?)+` repeats a group" in said, said
    (tmp_path / "remote.yaml").write_text("""\
remote_agents: { billing: { reply: ok, replies: [ { when: '(\\d+)*x', say: hm } ] } }
targets: { b: { type: a2a, url: "{{remote.billing.url}}" } }
tests: [ { name: t, target: b, scenario: { script: [ { say: hi } ] } } ]
""")
    remote = tamesu(["validate", "remote.yaml"], cwd=tmp_path, timeout=30)
    assert remote.returncode == 2
    assert "remote_agents.billing.replies[0].when: `(\\d+)*` repeats a group" in remote.stdout + remote.stderr
