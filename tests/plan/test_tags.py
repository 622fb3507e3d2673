"""A tag `--tags` can never choose is said where it is written (a warning: the test still runs)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_a_tag_that_tags_can_never_choose_is_warned_of(tmp_path: Path) -> None:
    # before: `tags: ["x,y", "!wip"]` validated in silence, and `--tags x,y` or `--tags '!wip'` chose nothing
    # (or everything): a tag written to be chosen never could be
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: t
    tags: [smoke, "odd tag", "x,y", "!wip", " padded", ""]
    scenario: { script: [ { say: hi } ] }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == [
        "warning: s.tamesu.yaml:5:30: tests[0].tags[2]: tag 'x,y' can never be chosen with --tags: it has a comma, "
        "where --tags splits",
        "warning: s.tamesu.yaml:5:37: tests[0].tags[3]: tag '!wip' can never be chosen with --tags: it begins with "
        "'!' or '-', which --tags reads as 'without'",
        "warning: s.tamesu.yaml:5:45: tests[0].tags[4]: tag ' padded' can never be chosen with --tags: it begins or "
        "ends with a space, which --tags strips",
        "warning: s.tamesu.yaml:5:56: tests[0].tags[5]: tag '' can never be chosen with --tags: it is empty",
    ], done.stderr
