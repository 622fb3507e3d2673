"""What a user writes in a JSONL test file: one test case per JSON object.

Two revisions of the agent test design meet here; where they disagree the later one is the default and the
earlier one stays available:

- **standard** (no `turns`, no `checkpoints`, no `simulator`): `input` is text, one message, or a message
  history; the target is called once with it (the later revision: stateless, no awaiting-input detection).
- **multi_turn** (`turns[]`, or `type: multi_turn`, or `input` with a `simulator`): static turns said in
  order, then, while the agent awaits input, the simulator, then a person (`--interactive`), then
  `on_missing_input` (the earlier revision). With `--simulator`, a case of one input message is one too: the
  earlier revision's "fully dynamic" flow (a history stays one call, as the later revision has it).
- **dynamic** (`checkpoints`): a simulator talks until every required checkpoint is reached (the later one).

Assertions stay raw mappings here: `tamesu.jsonl.assertions` maps them onto the engine's checks, so an error
in one points at its own position in the file."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from tamesu.plan.repeats import CaseRepeats
from tamesu.roles.case_user import MissingInput, Mode
from tamesu.types import Duration, Strict, YamlBool, YamlInt

DEFAULT_MAX_TURNS = 20


class ContentPart(Strict):
    """A part of a message's content: text, or a file (`file://` relative to the JSONL file, or a URL)."""

    type: Literal["text", "image", "file", "audio"]
    text: str | None = None
    source: str | None = None
    name: str | None = None
    mime: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> ContentPart:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs text")
        if self.type != "text" and not self.source:
            raise ValueError(f"an {self.type} part needs a source such as file://./receipt.jpg")
        return self


_PARTS = TypeAdapter(list[ContentPart])


class ChatMessage(Strict):
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentPart]

    @field_validator("content", mode="wrap")
    @classmethod
    def _text_or_parts(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        # one kind at a time: as a union, a list of parts was also told it is no string, and its parts' problems
        # sat under a path of pydantic's making (`content.list[function-after[...]][0]`)
        if isinstance(value, list):
            return _PARTS.validate_python(value)
        if not isinstance(value, str):
            raise ValueError('content is text, or a list of parts such as {"type": "text", "text": "..."}, not '
                             f"{json.dumps(value)[:60]}")
        return handler(value)

    @model_validator(mode="after")
    def _says_something(self) -> ChatMessage:
        if self.role == "user" and not self.text.strip() and not self.files:  # the agent would be asked nothing
            raise ValueError("a user message with no words and no file: write what the user says")
        return self

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text or "" for part in self.content if part.type == "text")

    @property
    def files(self) -> list[ContentPart]:
        return [] if isinstance(self.content, str) else [p for p in self.content if p.type != "text"]


def as_messages(value: object) -> object:
    """`input` as written (text, one message, a list of them) becomes a list of messages."""
    if isinstance(value, str):
        return [as_message(value)]
    if isinstance(value, dict):
        return [value]
    if value is not None and not isinstance(value, list):
        raise ValueError(f"input is text, a message {{role, content}} or a list of them, got {value!r}")
    return value


def as_message(value: object) -> object:
    if isinstance(value, str) and not value.strip():  # sent, the agent would be asked nothing
        raise ValueError(f"{'empty' if not value else 'only spaces'}: write what the user says")
    return {"role": "user", "content": value} if isinstance(value, str) else value


class Options(Strict):
    """The context options of the design, passed to the target (or to a simulator or validator)."""

    connector: str | None = None
    """A model for the target (a name under `models:`, or provider:model); model targets use it."""
    skip: dict[str, object] | None = None
    search: object = None
    mode: str | None = None
    metadata: dict[str, object] = Field(default_factory=dict)

    def sent(self) -> dict[str, object]:
        """What travels with a user turn: the options that were written."""
        return self.model_dump(exclude_defaults=True)


class Turn(Strict):
    input: ChatMessage
    assertions: list[object] = Field(default_factory=list, alias="assert")
    options: Options | None = None
    attachments: list[ContentPart] = Field(default_factory=list)

    @field_validator("input", mode="before")
    @classmethod
    def _text_is_a_message(cls, value: object) -> object:
        return as_message(value)


class SimulatorSpec(Strict):
    """Who plays the user when the static input runs out: a model under `models:` (or `agents:NAME`), a
    target of tamesu.yaml, or `scripts:module:function`. Default: `--simulator`, else `models.simulator`."""

    use: str | None = Field(None, min_length=1)
    options: Options | None = None
    metadata: dict[str, object] = Field(default_factory=dict)
    """The earlier revision writes persona and goal here directly; the later one under options.metadata."""

    def settings(self) -> dict[str, object]:
        return {**(self.options.metadata if self.options else {}), **self.metadata}


class InteractiveSpec(Strict):
    enabled: YamlBool = False
    timeout: Duration = Field(300.0, gt=0)
    """How long a person has to answer before the input counts as missing."""


class Checkpoint(Strict):
    id: str = Field(min_length=1)
    description: str | None = None
    assertion: object
    after: list[str] = Field(default_factory=list)
    """Checkpoints that must be reached first (at this turn or an earlier one)."""
    required: YamlBool = True


class TestCase(CaseRepeats):
    id: str = Field(min_length=1)
    name: str | None = None
    type: Literal["single_turn", "multi_turn", "dynamic"] | None = None
    input: list[ChatMessage] | None = None
    assertions: list[object] = Field(default_factory=list, alias="assert")
    options: Options | None = None
    turns: list[Turn] = Field(default_factory=list)
    simulator: SimulatorSpec | None = None
    interactive: InteractiveSpec | None = None
    on_missing_input: MissingInput | None = None
    final_assertions: list[object] = Field(default_factory=list)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    max_turns: YamlInt | None = Field(None, ge=1, le=1000)
    timeout: Duration | None = Field(None, gt=0)

    _simulated: bool = PrivateAttr(default=False)
    """Played on by `--simulator` after its one input (`drive_with_simulator`)."""

    __test__ = False  # not a pytest class

    def drive_with_simulator(self) -> bool:
        """With `--simulator` given, a case of one input message and nothing else is a multi-turn case the
        simulator plays on while the agent awaits input (the earlier revision's "fully dynamic" flow);
        whether it became one. An explicit `single_turn` and a message history stay one call."""
        if self.mode == "standard" and self.type is None and self.input is not None and len(self.input) == 1:
            self._simulated = True
        return self._simulated

    @field_validator("input", mode="before")
    @classmethod
    def _input_is_messages(cls, value: object) -> object:
        return as_messages(value)

    @property
    def mode(self) -> Mode:
        if self.type == "single_turn":
            return "standard"  # its one turn, if written as turns[0], is the input (the parser makes it so)
        if self.checkpoints or self.type == "dynamic":
            return "dynamic"
        if self.turns or self.type == "multi_turn" or self.simulator is not None or self._simulated:
            return "multi_turn"
        return "standard"

    def turn_limit(self) -> int:
        """`max_turns`, else the simulator's setting (the earlier revision's), else 20 or the turns written."""
        if self.max_turns is not None:
            return self.max_turns
        setting = self.simulator.settings().get("max_turns") if self.simulator else None
        return setting if isinstance(setting, int) and setting >= 1 else max(DEFAULT_MAX_TURNS, len(self.turns))

    def as_json(self) -> dict[str, Any]:
        """The case as a JSONL line would hold it (a lone user message written as text)."""
        data = self.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
        messages = data.get("input")
        if isinstance(messages, list) and len(messages) == 1 and messages[0].get("role") == "user" \
                and isinstance(messages[0].get("content"), str):
            data["input"] = messages[0]["content"]
        for turn in data.get("turns", []):
            message = turn.get("input")
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
                turn["input"] = message["content"]
        return data
