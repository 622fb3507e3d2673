"""A user's regular expression that can backtrack for ever is refused where it is written: Python's `re` holds the
interpreter while it matches, so `(a+)+$` against forty `a`s and a `b` hung a run past its test's timeout and
past SIGTERM (only SIGKILL ended it). The classic shape is refused; patterns that merely look alike are not. So is
a repeated group whose alternatives read one text two ways (`(b|bb)*c`: before, only nested repeats were caught)."""

from __future__ import annotations

import re
import time

import pytest

from tamesu.suite.patterns import runaway, runaway_in

RUNAWAY = [r"(a+)+$", r"(a*)*", r"(\w+\s?)+", r"(a{2,})+", r"(a+)*?", r"(.*)*", r"(\s*\w+)*$", r"(a|a+)+",
           r"(?:\w+)+@", r"(?i)(a+)+", r"(?#note)(x+)+", r"(?i:a+)+"]
# each measured exponential on its unit repeated (`(?:a?a?)*c`: 13 s at 20 `a`s, `(ab|a|ba)*c` 0.6 s at 20 `aba`s)
OVERLAPPING = [r"(b|bb)*c", r"(a|a)*", r"(ab|a|ba)*c", r"([^a]|b)+$", r"(.|a)*c", r"(?:a?a?)*c", r"(ab?|a)+$",
               r"(x(?:a|a))+", r"(\d{3}|\d{2})*x",
               r"(a{1,3})+$"]  # kept before, though 41 s at 32 `a`s and a `!`
# one reading only (`(a|ab)*`), or alternatives CPython reads as one class (`\w|\d`, `[a-z]|[0-9x]`)
ONE_READING = [r"(a|ab)*c", r"(ab|ac)*", r"(foo|bar|baz)+", r"(?:\.|[a-z])+", r"(\w|\d)+$", r"(a|b|a)+$",
               r"(?i)(a|A)+$", r"(?:[a-z]|[0-9x])+", r"(b|bb)*+c", r"(?>b|bb)*c", r"(b|bb)?c", r"(b|bb){1,3}c",
               r"(?:\b|x)+", r"(\n|\s)+$"]
FINE = [r"(?:ab+)*c", r"(?>a+)+", r"(a++)+", r"([a-z]+)", r"[(a+)+]", r"a+b+", r"(a|b)+",
        r"((ab)+c)+", r"\(a+\)+", r"ORD-\d+", r"(\d{3})-(\d+)", r"^(?:[a-z]+\.)+[a-z]+$", r"x*", r"([^)]+)",
        r"(?i)hello", r"(?P<x>\d+)-(?P=x)", r"(?<=a)b+"]


@pytest.mark.parametrize("pattern", RUNAWAY)
def test_a_repeated_group_that_repeats_with_nothing_to_split_it_is_refused(pattern: str) -> None:
    assert runaway(pattern) is not None


@pytest.mark.parametrize("pattern", FINE)
def test_a_pattern_that_only_looks_alike_is_kept(pattern: str) -> None:
    assert runaway(pattern) is None


@pytest.mark.parametrize("pattern", OVERLAPPING)
def test_a_repeated_group_whose_alternatives_read_one_text_two_ways_is_refused(pattern: str) -> None:
    why = runaway(pattern)
    assert why is not None and "group that reads some text in more than one way" in why, why


@pytest.mark.parametrize("pattern", ONE_READING)
def test_alternatives_with_one_reading_are_kept(pattern: str) -> None:
    assert runaway(pattern) is None


def test_alternatives_cpython_reads_as_one_class_do_not_backtrack() -> None:
    # why `(\w|\d)+$` is kept: re folds it into one class, so it is as fast as `[\w\d]+$` on its worst text
    started = time.monotonic()
    assert re.match(r"(\w|\d)+$", "1" * 5000 + "!") is None
    assert time.monotonic() - started < 1.0


def test_a_templated_patterns_refusal_quotes_what_was_written() -> None:
    # before: `(x+)+`, the placeholder it was checked with, which the user never wrote
    why = runaway_in({"query": ["ok", "({{vars.word}}+)+$"]}, "args")
    assert why is not None and why.startswith("args.query[1]: `({{vars.word}}+)+` repeats a group"), why
    why = runaway_in("{{captured.id}}-({{vars.a}}|{{vars.a}})*c", "when")
    assert why is not None and why.startswith("when: `{{captured.id}}-({{vars.a}}|{{vars.a}})*` repeats"), why


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
