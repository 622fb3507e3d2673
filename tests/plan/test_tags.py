"""A tag `--tags` can never choose is said where it is written (a warning: the test still runs)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_a_tag_that_tags_can_never_choose_is_warned_of(tmp_path: Path) -> None:
    # before: `tags: ["x,y", "!wip"]` validated in silence, and `--tags x,y` or `--tags '!wip'` chose nothing
    # (or everything): a tag written to be chosen never could be; now one can be chosen in double quotes
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: t
    tags: [smoke, "odd tag", "x,y", "!wip", " padded", "", 'say"hi']
    scenario: { script: [ { say: hi } ] }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == [
        "warning: s.tamesu.yaml:5:30: tests[0].tags[2]: tag 'x,y' can be chosen with --tags only in double quotes "
        "('\"x,y\"'): it has a comma, where --tags splits",
        "warning: s.tamesu.yaml:5:37: tests[0].tags[3]: tag '!wip' can be chosen with --tags only in double quotes "
        "('\"!wip\"'): it begins with '!' or '-', which --tags reads as 'without'",
        "warning: s.tamesu.yaml:5:45: tests[0].tags[4]: tag ' padded' can be chosen with --tags only in double "
        "quotes ('\" padded\"'): it begins or ends with a space, which --tags strips",
        "warning: s.tamesu.yaml:5:56: tests[0].tags[5]: tag '' can never be chosen with --tags: it is empty",
        "warning: s.tamesu.yaml:5:60: tests[0].tags[6]: tag 'say\"hi' can never be chosen with --tags: it has a "
        "double quote",
    ], done.stderr
    chosen = run_tamesu(["list", "s.tamesu.yaml", "--tags", '" padded"'], cwd=tmp_path)
    assert chosen.stdout.startswith("s/t "), chosen.stdout + chosen.stderr


_CASES = """\
models:
  bot: { provider: fake, rules: [ { say: hi } ] }
targets:
  bot: { type: model, model: bot }
tests:
  - name: greet
    cases:
      - { name: "Paris, France", vars: { city: paris } }
      - { name: Lyon, vars: { city: lyon } }
    scenario: { script: [ { say: "hi {{vars.city}}" } ] }
"""


def test_a_case_whose_name_has_a_comma_is_chosen_by_its_tag_in_double_quotes(tmp_path: Path) -> None:
    # before: its tag `case:Paris, France` could never be chosen: --tags split it into `case:Paris` and `France`,
    # which matched nothing (and `!case:Paris, France` excluded nothing), with no word from validate
    (tmp_path / "s.tamesu.yaml").write_text(_CASES)
    def listed(tags: str) -> list[str]:
        done = run_tamesu(["list", "s.tamesu.yaml", "--tags", tags], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return [line.split("  ")[0] for line in done.stdout.splitlines()]

    assert listed('"case:Paris, France"') == ["s/greet [Paris, France]"]
    assert listed('!"case:Paris, France"') == ["s/greet [Lyon]"]
    assert listed('case:Lyon, "case:Paris, France"') == ["s/greet [Paris, France]", "s/greet [Lyon]"]
    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--tags", '"case:Paris, France"'], cwd=tmp_path)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr
    unclosed = run_tamesu(["list", "s.tamesu.yaml", "--tags", '"case:Paris'], cwd=tmp_path)
    assert unclosed.returncode == 2
    assert "--tags: '\"case:Paris' opens a double quote it never closes" in unclosed.stderr, unclosed.stderr
