"""The `tamesu` group: the commands of modules of their own are imported only when used."""

from __future__ import annotations

from typing import ClassVar

import click


class LazyGroup(click.Group):
    """Commands that live in modules of their own are imported only when used, so `tamesu --version` and
    `tamesu validate` start fast. `tamesu --help` lists them by the first lines of their help, kept here: importing
    them for it (the loader, targets, SDKs) took 1 s of CPU against 0.15 s (tests/cli/test_cli_table.py checks
    that these lines are the commands' own)."""

    _lazy: ClassVar[dict[str, tuple[str, str, str]]] = {
        "test": ("tamesu.cli.test", "test_command",
                 "Run JSONL test cases (standard, multi-turn, dynamic) against one agent."),
        "validate": ("tamesu.cli.validate", "validate_command",
                     "Check suites (and JSONL test cases: files, folders of them, those the project's `suites` "
                     "name) without running them: every problem at once, with file:line:col."),
        "store": ("tamesu.cli.store", "store_group",
                  "The results store: import run folders, bring its schema up to date."),
        "view": ("tamesu.cli.store", "view_command",
                 "Serve the run history: runs, flaky tests, a test's history, comparisons, judge drift.")}
    _LISTING = "tamesu.listing_commands"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self._lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self._lazy:
            module, attribute, summary = self._lazy[name]
            if ctx.meta.get(self._LISTING):
                return click.Command(name, help=summary)  # only its help line is read
            import importlib

            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta[self._LISTING] = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            del ctx.meta[self._LISTING]
