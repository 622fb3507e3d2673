"""docs/cli.md's table of commands names every option of each command, as `tamesu COMMAND --help` has it.

Before: the table had drifted from the commands after later merges (`run` without `--report`, `--baseline`,
`--tolerance`, `--shard`; `list` with `--json` alone; `report` and `merge` without `--tolerance`). The options
below the table are generated from the commands; the table is written by hand, so it is checked here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click

from tamesu.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EVERYWHERE = {"--help", "--config", "--color"}
"""Options every command has, said once on the page rather than in each row."""
ELSEWHERE = {"test": ROOT / "docs" / "jsonl.md"}
"""A command whose row points to a page that lists its options."""


def _commands() -> dict[str, click.Command]:
    context = click.Context(main)
    found: dict[str, click.Command] = {}
    for name in main.list_commands(context):
        command = main.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            sub = click.Context(command)
            found.update({f"{name} {inner}": command.get_command(sub, inner)  # type: ignore[misc]
                          for inner in command.list_commands(sub)})
        else:
            found[name] = command
    return found


def _rows() -> dict[str, str]:
    table = (ROOT / "docs" / "cli.md").read_text()
    return {match.group(1): match.group(0) for match in re.finditer(r"^\| `tamesu ([a-z]+(?: [a-z]+)?)\b.*$",
                                                                    table, re.M)}


def test_the_table_has_a_row_naming_each_option_of_each_command() -> None:
    rows, missing = _rows(), {}
    for name, command in _commands().items():
        assert name in rows, f"docs/cli.md has no row for `tamesu {name}`"
        said = ELSEWHERE[name].read_text() if name in ELSEWHERE else rows[name]
        # an option is named by any of its spellings (`-n` or `--name`)
        left = sorted(parameter.opts[-1] for parameter in command.params if isinstance(parameter, click.Option)
                      and not EVERYWHERE & set(parameter.opts)
                      and not any(re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", said)
                                  for spelling in parameter.opts))
        if left:
            missing[name] = left
    assert missing == {}, missing


def test_every_option_says_in_help_what_it_does() -> None:
    """Before: `tamesu list --help` showed `--filter REGEX` and `--tags TAGS` with no words, `--config` said
    nothing on eight commands, `--color` and `report`/`merge`'s `--tolerance` neither."""
    silent = {name: sorted(parameter.opts[-1] for parameter in command.params
                           if isinstance(parameter, click.Option) and not parameter.hidden and not parameter.help)
              for name, command in _commands().items()}
    assert {name: options for name, options in silent.items() if options} == {}


def test_run_help_names_the_project_file_defaults_it_follows() -> None:
    """`--parallel`, `--out` and `--tolerance` take tamesu.yaml's `parallel`, `out` and `report.tolerance` when
    not given: before, `tamesu run --help` said "(default 1)", "(default tamesu-runs)" and "(default 0.2)",
    which a project that sets them contradicts."""
    helps = {max(parameter.opts, key=len): parameter.help or "" for parameter in _commands()["run"].params
             if isinstance(parameter, click.Option)}
    assert "parallel" in helps["--parallel"] and "tamesu.yaml" in helps["--parallel"]
    assert "out" in helps["--out"] and "tamesu.yaml" in helps["--out"]
    assert "report.tolerance" in helps["--tolerance"]


def test_report_and_out_help_say_their_defaults_as_the_commands_take_them() -> None:
    """Before: `run --report` and `test --report` said no default (the HTML report in the run folder, or
    tamesu.yaml's `report:`), and `merge --out` said "(default tamesu-runs)" while it takes tamesu.yaml's `out`
    as `run --out` does; `merge --report` said "as for `run`", whose default HTML report a merge never writes."""
    commands = _commands()

    def helps(name: str) -> dict[str, str]:
        return {max(parameter.opts, key=len): parameter.help or "" for parameter in commands[name].params
                if isinstance(parameter, click.Option)}

    for name in ("run", "test"):
        assert "tamesu.yaml's report" in helps(name)["--report"] and "html" in helps(name)["--report"], name
    assert "tamesu.yaml's out" in helps("merge")["--out"]
    assert "tamesu.yaml's report" in helps("merge")["--report"] and "none" in helps("merge")["--report"]
    # `init`'s one argument said nowhere where it writes without one
    assert "DIRECTORY (default: the current folder)" in (commands["init"].help or "")


def test_help_lists_the_commands_of_their_own_modules_by_their_own_words_without_importing_them() -> None:
    """Before: `tamesu --help` imported `test`, `validate`, `store` and `view` (the loader, every target and its
    SDK) to read their first lines: 1 s of CPU against 0.15 s for any other command's help. The lines it lists
    are the commands' own, at any width."""
    context = click.Context(main)
    context.meta["tamesu.listing_commands"] = True
    real = click.Context(main)
    for name in ("test", "validate", "store", "view"):
        listed, command = main.get_command(context, name), main.get_command(real, name)
        assert listed is not None and command is not None and listed is not command
        for width in (20, 45, 80, 200):
            assert listed.get_short_help_str(width) == command.get_short_help_str(width), (name, width)
    shown = subprocess.run([sys.executable, "-c", "import sys; from tamesu.cli.main import main\n"
                            "try: main(['--help'])\nexcept SystemExit: pass\n"
                            "print(sorted(m for m in sys.modules if m.startswith(('tamesu.plan', 'tamesu.cli.'))))"],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "120"})
    assert shown.returncode == 0, shown.stderr
    assert "validate  Check suites (and JSONL test cases" in shown.stdout
    imported = shown.stdout.splitlines()[-1]
    assert "tamesu.plan" not in imported and not any(f"'{module}'" in imported for module in (
        "tamesu.cli.test", "tamesu.cli.validate", "tamesu.cli.store")), imported
