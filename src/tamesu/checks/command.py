"""`command`: a shell command run after the conversation; its exit code and output decide.

`command: "./scripts/check.sh {{captured.order_id}}"` expects exit code 0; the mapping form adds `exit_code`,
`contains` / `not_contains` / `matches` on stdout and stderr together, `timeout` and `env`. The command runs in
the suite's folder with the environment of tamesu plus `env`.

A command still running at its `timeout` is killed (its whole process group) and the test is an error of its
environment (exit 3), never the agent's failure, negated or not: the check's own process hung, and said nothing
of the agent. A script that waits for something the agent should have done gives up by itself before `timeout`
and exits non-zero, which is the agent's failure.

Values filled into `run` by templates are shell-quoted: a captured value comes from the agent, and must reach
the script as one argument, never as shell syntax. Write `{{captured.x}}` bare, not inside quotes.
"""

from __future__ import annotations

import json
import os
import re
import shlex

from pydantic import Field, field_validator, model_validator

from tamesu.checks._compare import render_pattern, template_failed, valid_pattern
from tamesu.checks._quote import QUOTED
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import InfraError, SuiteProblem, TemplateError
from tamesu.matching import number_text, one_line, shown
from tamesu.plugins import register
from tamesu.runtime.shell import run_shell
from tamesu.suite.schema import Duration, Strict
from tamesu.suite.templates import TEMPLATE, Context
from tamesu.types import YamlBool, YamlFloat, YamlInt

_TAIL_LINES = 5

EnvValue = str | YamlInt | YamlFloat | YamlBool  # `X: yes` is the text yes, as an environment holds it


class CommandSpec(Strict):
    run: str = Field(min_length=1)
    exit_code: YamlInt | None = 0
    """The exit code expected; null accepts any (then an output check is required)."""
    contains: str | list[str] | None = None
    not_contains: str | list[str] | None = None
    matches: str | None = None
    timeout: Duration | None = Field(None, gt=0)
    """Default: the run's command timeout (60s)."""
    env: dict[str, EnvValue] = Field(default_factory=dict)

    @field_validator("matches")
    @classmethod
    def _valid_matches(cls, value: str | None) -> str | None:
        return None if value is None else valid_pattern(value)

    @model_validator(mode="after")
    def _can_fail(self) -> CommandSpec:
        if self.exit_code is None and self.contains is None and self.not_contains is None and self.matches is None:
            raise ValueError("exit_code: null needs contains, not_contains or matches")
        return self


def render_command(context: Context, command: str) -> str:
    def quoted(match: re.Match[str]) -> str:
        value = context.lookup(match.group(1))
        return shlex.quote(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))

    return TEMPLATE.sub(quoted, command)


def _env_text(value: EnvValue) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _as_list(value: str | list[str] | None) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return "no output"
    tail = one_line(" | ".join(lines[-_TAIL_LINES:]))
    # its end is what a failing command says last (the error): the start is what is cut
    return "output: " + json.dumps(tail if len(tail) <= QUOTED else "…" + tail[1 - QUOTED:], ensure_ascii=False)


_SHELL_COULD_NOT = {126: "the command is not executable", 127: "the shell found no such command"}
"""The exit codes POSIX shells give a command they could not run (a script's own `exit 127` reads the same)."""


class _Outcome:
    def __init__(self, code: int | None, output: str) -> None:
        self.code = code
        """None when the command was killed for running too long."""
        self.output = output


async def _execute(command: str, cwd: str, env: dict[str, str], timeout: float) -> _Outcome:
    """Run `command` in its own process group; past `timeout` the whole group is killed."""
    outcome = await run_shell(command, cwd, env, timeout, keep=False)
    return _Outcome(outcome.code, outcome.output)


@register("checks", "command")
class Command(Check[CommandSpec]):
    key = "command"
    whole_run = "a command's answer after the conversation"
    Spec = CommandSpec
    shorthand = "run"
    spec: CommandSpec

    async def evaluate(self, run: RunView) -> Verdict:
        spec = self.spec
        try:
            command = render_command(run.context, spec.run)
            env = {**os.environ, **{k: run.context.render_text(_env_text(v)) for k, v in spec.env.items()}}
            contains = [run.context.render_text(n) for n in _as_list(spec.contains)]
            not_contains = [run.context.render_text(n) for n in _as_list(spec.not_contains)]
            pattern = render_pattern(run.context, spec.matches) if spec.matches is not None else None
        except TemplateError as exc:
            return template_failed(exc)
        timeout = spec.timeout if spec.timeout is not None else run.command_timeout
        # The command is shown as written: its rendered form may carry secrets.
        label = f"`{spec.run}`"
        try:
            outcome = await _execute(command, str(run.base_dir), env, timeout)
        except OSError as exc:  # no shell, no process to spare: nothing the agent did
            raise InfraError(f"{label} could not start: {exc}") from None
        if outcome.code in _SHELL_COULD_NOT and spec.exit_code not in _SHELL_COULD_NOT:
            # the shell found no such command, or could not run it: the suite's command, never the agent's answer
            raise SuiteProblem(f"{label} could not be run: {_SHELL_COULD_NOT[outcome.code]} (exit code "
                               f"{outcome.code}), {_tail(outcome.output)}")
        if outcome.code is None:
            # the check's own process hung (a slow database, a script waiting on a lock): nothing it could say of
            # the agent, as an http check's backend that never answers; a failed verdict blamed the agent (exit 1)
            # and, negated, passed. A script that waits for the agent's effect gives up itself, before `timeout`.
            raise InfraError(f"{label} did not finish within {number_text(timeout)}s (its timeout; killed), "
                             f"{_tail(outcome.output)}")
        problem = self._problem(outcome, contains, not_contains, pattern)
        if problem:
            return Verdict(passed=False, reason=f"{label}: {problem}; exit code {outcome.code}, "
                                                f"{_tail(outcome.output)}")
        return Verdict(passed=True, reason=f"{label} exited {outcome.code}", evidence=[_tail(outcome.output)])

    def _problem(
        self, outcome: _Outcome, contains: list[str], not_contains: list[str], pattern: re.Pattern[str] | None
    ) -> str | None:
        if self.spec.exit_code is not None and outcome.code != self.spec.exit_code:
            return f"expected exit code {self.spec.exit_code}"
        missing = next((n for n in contains if n not in outcome.output), None)
        if missing is not None:
            return f"expected the output to contain {shown(missing)}"
        present = next((n for n in not_contains if n in outcome.output), None)
        if present is not None:
            return f"expected the output not to contain {shown(present)}"
        if pattern is not None and not pattern.search(outcome.output):
            return f"expected the output to match /{self.spec.matches}/"
        return None
