"""The fake provider: deterministic, offline answers decided by readable rules.

It lets a team run a whole suite (simulated user, judges, extraction, a model target) without a model, and
lets tamesu's own tests drive every role. The rules read `request.context`, the structured inputs each role
puts there, never the prompt text, so rewording a prompt never changes a fake answer.

Context keys it reads, by purpose:

- simulator: `goal` (str | None), `simulator_turns` (how many turns the simulator already said), `last_agent`
  (the agent's last turn, "" before it spoke), `attack` (a red-team pack's attack, or absent: its `openings`
  are said in order, one per turn, before any rule applies).
- judge and simulator_audit: `mode` ("rubric", "grounded", "evaluator", "simulator_audit"), `rubric`, `scale`
  ("binary", "1-5"), `transcript` (a list of {role, text, turn}), `claims` (grounded: the agent's text to
  check), `context` (the reference text, or None), `evaluator` (evaluator: the built-in evaluator's name),
  `trace` (the agent's spans, summarised).
- extract: `description`, `text` (the agent turn to take the value from).
- target, counterpart, generator: `message` if given, else the content of the last user message.

Embeddings (`similar_to` with `method: embedding` naming a fake model) come from no rule: each text's words are
counted into 64 slots by their CRC-32, so texts sharing words are near and nothing else is.

A rule that does not apply is skipped; when none applies the fake says so, loudly: a judge never passes by
default, a model target never makes an answer up. Only the simulator may end quietly (it stops talking).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from tamesu.matching import quoted
from tamesu.models._fake_rule_errors import Found, in_file, listed, validation_problems
from tamesu.models.base import (
    Embeddings,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolRequest,
    Usage,
)
from tamesu.models.fake_rules import ExtractRule, JudgeRule, Rule, TurnRule, rule_kind, unknown_kind
from tamesu.models.spec import ModelSpec
from tamesu.plugins import register


def _search(pattern: str | None, text: str) -> re.Match[str] | None:
    return re.search(pattern, text) if pattern is not None else None


RuleT = TypeVar("RuleT", bound=BaseModel)


def _checked(raw: object, index: int) -> tuple[Rule | None, list[Found]]:
    """One rule from what a user wrote, the kind told by its keys; or what is wrong with it."""
    if isinstance(raw, Rule):
        return raw, []
    if not isinstance(raw, Mapping):
        return None, [(index, (), f"a rule is a mapping, got {type(raw).__name__}", False)]
    found = rule_kind(raw)
    if found is None:
        return None, [(index, (), unknown_kind(raw), False)]
    model, kind = found
    try:
        return model.model_validate(dict(raw)), []  # type: ignore[return-value]  # _KINDS holds only Rule's members
    except ValidationError as exc:
        return None, validation_problems(index, exc, model, kind)


def parse_rules(raw: object, *, path: Path | None = None, text: str = "") -> list[Rule]:
    """The rules, or a RuleErrors naming every bad one at its place: in the file at `path` (its `text`) when
    they were read from one, else by index."""
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ValueError(f"fake rules must be a list of rules, got {type(raw).__name__}")
    rules: list[Rule] = []
    problems: list[Found] = []
    for index, item in enumerate(raw):
        rule, found = _checked(item, index)
        problems.extend(found)
        if rule is not None:
            rules.append(rule)
    if problems:
        raise in_file(problems, path, text) if path is not None else listed(problems)
    return rules


MAX_RULES_BYTES = 4_000_000
"""A rules file larger than this is a mistake (a rule is a few lines): /dev/zero or a log file named by accident
must be refused before it is read, not after it filled memory."""


def _rules_text(path: Path) -> str:
    """The file's text: a regular file only (a FIFO would block, a device never end), at most MAX_RULES_BYTES."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else \
            "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a regular file"
        raise ValueError(f"it is {kind}, not a regular file")
    with open(path, "rb") as handle:
        data = handle.read(MAX_RULES_BYTES + 1)
    if len(data) > MAX_RULES_BYTES:
        raise ValueError(f"it is larger than {MAX_RULES_BYTES:,} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None


_CHECKED: dict[str, object] = {}
"""Rules files the plan has read and checked (`checked_rules`): their data by the file's text, the newest
`_CHECKED_KEPT` (a process that loads plan after plan, a pytest session of suites, keeps no more)."""
_CHECKED_KEPT = 16


def checked_rules(text: str, data: object) -> None:
    """Told by the plan of a rules file it has read (with the suite reader, which parses most files at C speed)
    and found no problem in: the provider that loads the same text later takes `data` rather than parsing it
    again with ruamel in pure Python (two files cost a `tamesu test` run of three cases ~15 ms of its ~130)."""
    _CHECKED.pop(text, None)
    _CHECKED[text] = data
    while len(_CHECKED) > _CHECKED_KEPT:
        del _CHECKED[next(iter(_CHECKED))]


def load_rules_file(path: Path) -> list[Rule]:
    try:
        text = _rules_text(path)
        data = _CHECKED[text] if text in _CHECKED else YAML(typ="safe").load(text)
    except OSError as exc:
        raise ValueError(f"fake rules file {path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"fake rules file {path}: cannot read it: {exc}") from None
    except YAMLError as exc:
        raise ValueError(f"fake rules file {path}: not valid YAML: {exc}") from None
    if isinstance(data, Mapping) and "rules" in data:
        data = data["rules"]  # also accept `rules:` at the top, so the file can say what it is
    if not isinstance(data, Sequence) or isinstance(data, str):
        raise ValueError(f"fake rules file {path}: a list of rules, got {type(data).__name__}")
    return parse_rules(data, path=path, text=text)


def _words(text: str) -> int:
    return len(text.split())


def count_words(messages: Sequence[Message]) -> int:
    """The fake's input token count: words, so a budget test can predict what a call costs."""
    return sum(_words(m.content) for m in messages)


def _default_for(schema: Mapping[str, object]) -> object:
    if "default" in schema:
        return schema["default"]
    kinds, any_of = schema.get("type"), schema.get("anyOf")
    options: list[object] = [kinds] if isinstance(kinds, str) else list(kinds) if isinstance(kinds, list) else []
    options += [o.get("type") for o in (any_of if isinstance(any_of, list) else []) if isinstance(o, Mapping)]
    kind = next((k for k in options if k and k != "null"), None)
    return {"string": "", "boolean": False, "number": 0, "integer": 0, "array": [], "object": {}}.get(str(kind))


def shaped(answer: dict[str, object], schema: Mapping[str, object] | None) -> dict[str, object]:
    """The answer in the schema's shape: its properties only, each present (a typed default if missing)."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, Mapping):
        return answer
    return {key: answer[key] if key in answer else _default_for(prop) for key, prop in properties.items()}


def transcript_text(lines: object) -> str:
    """How judge rules see a transcript: one `role: text` line per entry."""
    if isinstance(lines, str):
        return lines
    out = []
    for line in lines if isinstance(lines, list | tuple) else []:
        if isinstance(line, Mapping):
            out.append(f"{line.get('role', '')}: {line.get('text', '')}")
    return "\n".join(out)


def _count(value: object) -> int:
    # a turn count the engine put in the context (an int; the text of one read back from a cache)
    return int(value) if isinstance(value, int | float | str) and value != "" else 0


@register("providers", "fake")
class FakeProvider(Provider):
    """Answers every purpose from rules; `fake=True` on every response."""

    name = "fake"

    def __init__(self, rules: Sequence[object] = (), model: str = "fake") -> None:
        super().__init__(model or "fake")
        self.rules = parse_rules(list(rules))

    @classmethod
    def from_spec(cls, spec: ModelSpec, api_key: str | None = None, *, base_dir: Path | None = None) -> FakeProvider:
        """The rules are `spec.rules`: a list, or the path of a YAML file of them (relative to `base_dir`,
        default the current directory). A bad rule is a ValueError saying which and why."""
        del api_key  # a fake needs no key; the parameter keeps the providers' constructor shape
        rules = spec.rules
        if isinstance(rules, str | Path):
            path = Path(rules)
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            return cls(load_rules_file(path), spec.model or "fake")
        return cls(parse_rules(rules), spec.model or "fake")

    async def embed(self, texts: list[str]) -> Embeddings:
        """Each text's words counted into `EMBEDDING_SLOTS` slots by their CRC-32, then scaled to length 1: texts
        that share words are near, and nothing else is (no synonyms, no meaning)."""
        return Embeddings(vectors=[_word_slots(text) for text in texts])

    def _of(self, kind: type[RuleT]) -> list[tuple[int, RuleT]]:
        return [(number, rule) for number, rule in enumerate(self.rules, start=1) if isinstance(rule, kind)]

    async def generate(self, request: ModelRequest) -> ModelResponse:
        text = ""
        tool_calls: list[ToolRequest] = []
        if request.purpose == "simulator":
            text = self._json(self._simulator(request.context), request)
        elif request.purpose in ("judge", "simulator_audit"):
            text = self._json(self._judge(request.context), request)
        elif request.purpose == "extract":
            text = self._json(self._extract(request.context), request)
        else:
            text, tool_calls = self._target(request)
        return ModelResponse(
            text=text, tool_calls=tool_calls, finish_reason="tool_calls" if tool_calls else "stop",
            usage=Usage(input_tokens=count_words(request.messages), output_tokens=_words(text)),
            provider=self.name, model=self.model, fake=True,
        )

    @staticmethod
    def _json(answer: dict[str, object], request: ModelRequest) -> str:
        return json.dumps(shaped(answer, request.json_schema), ensure_ascii=False)

    def _simulator(self, context: Mapping[str, object]) -> dict[str, object]:
        attack = context.get("attack")
        turns = _count(context.get("simulator_turns"))
        if isinstance(attack, Mapping) and turns < len(attack.get("openings") or []):
            return {"input": attack["openings"][turns],
                    "reasoning": f"fake simulator: opening {turns + 1} of the attack {attack.get('pack')}"}
        goal = None if isinstance(attack, Mapping) else context.get("goal")
        if goal and not context.get("simulator_turns"):
            return {"input": goal, "reasoning": "fake simulator: the goal comes first"}
        last = str(context.get("last_agent") or "")
        for number, rule in self._of(TurnRule):
            if rule.when is None or _search(rule.when, last):
                answer: dict[str, object] = {
                    "input": rule.say or "", "stop": rule.stop, "goal_achieved": rule.goal_achieved,
                    "stop_when_met": rule.stop_when_met,
                    "reasoning": f"fake simulator: rule {number}" + (f" (when {rule.when!r})" if rule.when else ""),
                }
                if rule.dtmf:
                    answer["dtmf"] = rule.dtmf
                return answer
        return {"input": "", "stop": True, "reasoning": "fake simulator: no rule for the agent's last turn"}

    def _judge(self, context: Mapping[str, object]) -> dict[str, object]:
        mode = str(context.get("mode", "rubric"))
        rubric = str(context.get("rubric") or "")
        said = str(context.get("claims") or "") if mode == "grounded" else transcript_text(context.get("transcript"))
        reference = str(context.get("context") or "")
        evaluator = str(context.get("evaluator") or "")
        for number, rule in self._of(JudgeRule):
            if rule.check != mode:
                continue
            if rule.rubric is not None and not _search(rule.rubric, rubric):
                continue
            if rule.evaluator is not None and not _search(rule.evaluator, evaluator):
                continue
            found = _search(rule.transcript, said)
            if rule.transcript is not None and not found:
                continue
            if rule.not_transcript is not None and _search(rule.not_transcript, said):
                continue
            if rule.context is not None and not _search(rule.context, reference):
                continue
            in_trace = _search(rule.trace, str(context.get("trace") or ""))
            if rule.trace is not None and not in_trace:
                continue
            top, bottom = (5, 1) if context.get("scale") == "1-5" and mode == "rubric" else (1, 0)
            cited = found or in_trace
            evidence = rule.evidence if rule.evidence is not None else ([cited.group(0)] if cited else [])
            return {
                "pass": rule.passed,
                "score": rule.score if rule.score is not None else (top if rule.passed else bottom),
                "reason": rule.reason or f"fake judge: rule {number}", "evidence": evidence,
            }
        what = {"rubric": f"rubric {quoted(rubric, 80)}", "evaluator": f"the evaluator {evaluator}",
                "simulator_audit": "the simulated user's audit"}.get(
            mode, "the grounded check")
        raise ModelError(f"fake judge: no rule matches {what}", retryable=False)

    def _extract(self, context: Mapping[str, object]) -> dict[str, object]:
        description = str(context.get("description") or "")
        text = str(context.get("text") or "")
        described = False
        for _, rule in self._of(ExtractRule):
            if not _search(rule.description, description):
                continue
            described = True
            if rule.text is not None and not _search(rule.text, text):
                continue
            if rule.pattern is None:
                if rule.value is None:
                    return {"found": False, "value": ""}
                return {"found": True, "value": rule.value}
            match = _search(rule.pattern, text)
            if match:
                return {"found": True, "value": match.group(1) if match.groups() else match.group(0)}
        if not described:
            raise ModelError(f"fake extract: no rule matches description {quoted(description, 80)}", retryable=False)
        return {"found": False, "value": ""}

    def _target(self, request: ModelRequest) -> tuple[str, list[ToolRequest]]:
        message = request.context.get("message")
        if message is None:
            message = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        answering_tools = bool(request.messages) and request.messages[-1].role == "tool"
        for _, rule in self._of(TurnRule):
            if rule.when is not None and not _search(rule.when, str(message)):
                continue
            if rule.tool_calls and not answering_tools:
                # ids only need to be unique within the conversation and the same on every run
                calls = [ToolRequest(id=f"fake_{len(request.messages)}_{k}", name=c.name, arguments=c.args)
                         for k, c in enumerate(rule.tool_calls, start=1)]
                return "", calls
            return rule.say or "", []
        raise ModelError(f"fake {request.purpose}: no rule matches the message {quoted(str(message), 80)}",
                         retryable=False)


EMBEDDING_SLOTS = 64
"""The length of the fake provider's vectors."""


def _word_slots(text: str) -> list[float]:
    counts = [0.0] * EMBEDDING_SLOTS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        counts[zlib.crc32(word.encode()) % EMBEDDING_SLOTS] += 1.0
    length = math.sqrt(sum(c * c for c in counts))
    return [c / length for c in counts] if length else counts
