"""`golden`: the conversation matches a reviewed transcript kept in a file next to the suite.

`golden: golden/refund.txt` or `{file, mode: exact|similar|judge, min: 0.8, rubric, model}`. `file` is
relative to the suite and may hold templates (`golden/{{vars.lang}}.txt`, one file per case).

The golden file is the transcript as a person reads it, user turns included (the user's side is part of
the conversation: a script step's data shows as JSON and files as [name], as in transcript.json):

    user: I'd like to move my booking to Saturday
    agent: Done: your booking is now on Saturday.
      Anything else?

A message of several lines continues on lines indented by two spaces. `on_turn` narrows the transcript to
that turn's user and agent lines. With `--update-golden` the check writes what it saw (creating folders)
and passes with "golden file written"; a missing file makes the run an error that says so (the suite's to
fix: no verdict on the agent). Review the file, then commit it.

Modes:
- `exact`: the same text, ignoring trailing spaces, line endings and trailing blank lines. A difference
  names its first line; the evidence is a unified diff.
- `similar`: the agent turns are compared in order, each with `similar_to`'s lexical similarity, and the
  score is their mean (a turn missing on either side scores 0): at least `min`. User lines are not scored,
  so a simulated user that words things differently does not move the score; the reason names the least
  similar turn.
- `judge`: the judge model (`model` overrides `models.judge`) decides whether the transcript says the same
  things as the golden one, plus `rubric` when given.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from tamesu.checks._compare import template_failed
from tamesu.checks._quote import quote
from tamesu.checks.base import Check, Exchange, RunView, Verdict
from tamesu.checks.similar import lexical_similarity
from tamesu.errors import InfraError, SuiteProblem, TemplateError
from tamesu.matching import number_text, shown_apart
from tamesu.models.base import ModelError
from tamesu.models.spec import ModelSpec
from tamesu.plugins import register
from tamesu.suite.schema import Strict
from tamesu.suite.secrets import Redactor
from tamesu.types import YamlFloat

_INDENT = "  "
_DIFF_LINES = 60  # of a unified diff kept as evidence; past that the reason already says enough


class GoldenSpec(Strict):
    file: str = Field(min_length=1)
    mode: Literal["exact", "similar", "judge"] = "exact"
    min: YamlFloat = Field(0.8, ge=0, le=1)
    """similar: the lowest mean similarity of the agent turns that passes."""
    rubric: str | None = None
    """judge: what else the judge must hold the transcript to."""
    model: str | ModelSpec | None = None
    """judge: the model that decides, instead of models.judge."""

    @model_validator(mode="after")
    def _coherent(self) -> GoldenSpec:
        if "min" in self.model_fields_set and self.mode != "similar":
            raise ValueError("min is for mode: similar")
        for key in ("rubric", "model"):
            if key in self.model_fields_set and self.mode != "judge":
                raise ValueError(f"{key} is for mode: judge")
        return self


# ---------------------------------------------------------------- the golden transcript as text


def _numbered(exchanges: list[Exchange]) -> list[tuple[Literal["user", "agent"], str, int]]:
    """(role, text, turn) in order: each exchange's user turn, then the agent's."""
    lines: list[tuple[Literal["user", "agent"], str, int]] = []
    for exchange in exchanges:
        if exchange.user is not None:
            lines.append(("user", exchange.user.display(), exchange.index))
        lines.append(("agent", exchange.agent.text, exchange.index))
    return lines


def transcript_lines(exchanges: list[Exchange]) -> list[tuple[str, str]]:
    """(role, text) in order, as the golden file holds them."""
    return [(role, text) for role, text, _ in _numbered(exchanges)]


def render(lines: list[tuple[str, str]]) -> str:
    out = []
    for role, text in lines:
        first, *rest = text.split("\n") if text else [""]
        out.append(f"{role}: {first}".rstrip())
        out.extend(f"{_INDENT}{line}".rstrip() for line in rest)
    return "\n".join(out) + "\n"


def parse(text: str) -> list[tuple[str, str]]:
    """The (role, text) entries of a golden file; a line that starts no entry continues the last one."""
    entries: list[tuple[str, list[str]]] = []
    for line in _normalized(text):
        role, colon, said = line.partition(":")
        if colon and role in ("user", "agent") and not line.startswith(_INDENT):
            entries.append((role, [said.removeprefix(" ")]))
        elif entries:
            entries[-1][1].append(line.removeprefix(_INDENT))
    return [(role, "\n".join(parts).rstrip()) for role, parts in entries]


def _normalized(text: str) -> list[str]:
    """Lines without line-ending or trailing-space differences, and without trailing blank lines."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


# ---------------------------------------------------------------- the check


@register("checks", "golden")
class Golden(Check[GoldenSpec]):
    """The run's transcript against a golden file: exact, similar, or as a judge sees it."""

    key = "golden"
    Spec = GoldenSpec
    shorthand = "file"
    spec: GoldenSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            name = run.context.render_text(self.spec.file)
        except TemplateError as exc:
            return template_failed(exc)
        path = run.base_dir / name
        seen = transcript_lines(run.exchanges)
        if run.update_golden:
            return _write(path, name, seen, run.redactor)
        if run.redactor is not None:
            # the file was written masked: the transcript is compared as it was written
            seen = [(role, run.redactor.text(text)) for role, text in seen]
        try:
            golden = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            # the suite's to fix, not the agent's failure: the run is an error saying so, as a broken judge's is
            raise SuiteProblem(f"no golden file {name}: {run.write_golden}") from None
        except OSError as exc:
            raise InfraError(f"cannot read golden file {name}: {exc.strerror or exc}") from None
        if self.spec.mode == "exact":
            return _exact(name, golden, render(seen))
        if self.spec.mode == "similar":
            return _similar(name, parse(golden), run.exchanges, self.spec.min, run.turn_labelled)
        return await self._judge(run, name, golden, seen)

    async def _judge(self, run: RunView, name: str, golden: str, seen: list[tuple[str, str]]) -> Verdict:
        # Imported here: the judge's prompts are loaded only by suites that use a model-graded check.
        from tamesu.checks.judge import to_verdict
        from tamesu.roles.judge import Judge, JudgeInput, Line

        if run.models is None:
            raise SuiteProblem("golden (mode: judge) needs a judge model: configure models.judge or the "
                             "assertion's model")
        try:
            client = run.models.client("judge", self.spec.model)
        except ModelError as exc:
            raise InfraError(f"golden (mode: judge): {exc}") from exc
        judge = Judge(client, on="golden")
        assert judge.own is not None
        base = judge.own.render("rubric")
        rubric = base if not self.spec.rubric else f"{base}\n{self.spec.rubric}"
        given = JudgeInput(
            rubric=rubric,
            transcript=[Line(role=role, text=text, turn=turn) for role, text, turn in _numbered(run.exchanges)],
            tool_calls=[call.model_dump(mode="json") for call in run.tool_calls],
            metrics=dict(run.metrics),
            context=f"Golden transcript ({name}):\n{golden.strip()}",
        )
        return to_verdict(await judge.grade(given))


def _write(path: Path, name: str, seen: list[tuple[str, str]], redactor: Redactor | None) -> Verdict:
    # a golden file is meant to be committed: a secret the agent repeated must not end up in it
    text = redactor.text(render(seen)) if redactor is not None else render(seen)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return Verdict(passed=False, reason=f"cannot write golden file {name}: {exc.strerror or exc}")
    return Verdict(passed=True, reason=f"golden file written: {name} ({len(seen)} messages)")


def _exact(name: str, golden: str, actual: str) -> Verdict:
    want, have = _normalized(golden), _normalized(actual)
    if want == have:
        return Verdict(passed=True, score=1.0, reason=f"the transcript matches golden file {name} "
                                                       f"({len(have)} lines)")
    line = next((i for i, (w, h) in enumerate(zip(want, have, strict=False)) if w != h), min(len(want), len(have)))
    expected, found = shown_apart(want[line] if line < len(want) else "", have[line] if line < len(have) else "")
    expected = expected if line < len(want) else "the end of the file"
    found = found if line < len(have) else "the end of the transcript"
    diff = list(difflib.unified_diff(want, have, fromfile=name, tofile="this run", lineterm=""))
    evidence = "\n".join(diff[:_DIFF_LINES] + (["…"] if len(diff) > _DIFF_LINES else []))
    return Verdict(passed=False, score=0.0, evidence=[evidence],
                   reason=f"the transcript differs from golden file {name} at line {line + 1}: expected "
                   f"{expected}, found {found}")


def _similar(name: str, golden: list[tuple[str, str]], exchanges: list[Exchange], minimum: float,
             labelled: bool = False) -> Verdict:
    want = [text for role, text in golden if role == "agent"]
    have = [e.agent.text for e in exchanges]
    count = max(len(want), len(have))
    if count == 0:
        return Verdict(passed=True, score=1.0, reason=f"neither golden file {name} nor the run has agent turns")
    scores = [lexical_similarity(want[i], have[i]) if i < len(want) and i < len(have) else 0.0
              for i in range(count)]
    score = round(sum(scores) / count, 4)
    worst = min(range(count), key=lambda i: scores[i])
    counts = "" if len(want) == len(have) else f"; the golden file has {len(want)} agent turns, the run {len(have)}"
    if score >= minimum:
        return Verdict(passed=True, score=score,
                       reason=f"the agent turns are {score:.2f} similar to golden file {name} "
                       f"(min {number_text(minimum)}){counts}")
    expected = quote(want[worst], 120) if worst < len(want) else "no turn"
    found = quote(have[worst], 120) if worst < len(have) else "no turn"
    # Named by the run's turn number, so on_turn: 3 says turn 3, not "the first".
    turn = (exchanges[0].index if exchanges else 1) + worst
    if labelled and count == 1:  # `golden (turn 3): the answer is only ...`: the label names its one turn
        return Verdict(passed=False, score=score, evidence=[f"expected {expected}, found {found}"],
                       reason=f"the answer is only {score:.2f} similar to golden file {name} (min "
                       f"{number_text(minimum)}): expected {expected}, found {found}")
    return Verdict(passed=False, score=score, evidence=[f"expected {expected}, found {found}"],
                   reason=f"the agent turns are only {score:.2f} similar to golden file {name} (min "
                   f"{number_text(minimum)}){counts}; least similar: turn {turn} ({scores[worst]:.2f}): "
                   f"expected {expected}, found {found}")
