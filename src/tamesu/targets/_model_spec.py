"""What a `model` target's suite entry says: the model, the system prompt, and the tools with their answers.

The fields are documented where the target is (`tamesu.targets.model`); this module holds only the shapes, so the
target's module keeps to its one job (asking the model and answering its tool calls).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from tamesu.models.base import ToolSpec
from tamesu.models.spec import ModelSpec
from tamesu.suite.patterns import runaway_in
from tamesu.targets.base import TargetSpec
from tamesu.targets.tool_parameters import ToolParameters
from tamesu.types import Strict, YamlFloat, YamlInt

__all__ = ["ModelTargetSpec", "ModelToolSpec", "ToolResultCase"]

# The name rule OpenAI and Anthropic share for functions; checked here so a bad name fails at validate.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _no_parameters() -> dict[str, object]:
    return {"type": "object", "properties": {}}


class ToolResultCase(Strict):
    """One entry of a tool's `results`: when the arguments match, this result (or this error)."""

    when: dict[str, object] = Field(default_factory=dict)
    """Argument name: expected value, or a full regular expression for its text. Empty matches every call."""
    result: object = None
    """The result returned when `when` matches."""
    error: str | None = None
    """The error the call fails with when `when` matches."""

    @field_validator("when")
    @classmethod
    def _no_runaway(cls, when: dict[str, object]) -> dict[str, object]:
        # a string is tried as a full pattern on the agent's arguments: one that backtracks for ever holds the run
        # past every timeout and signal, as a tool_called's `args` would (the model target's, realtime's, pipecat's)
        if (why := runaway_in(when, "when")) is not None:
            raise ValueError(why)
        return when

    @model_validator(mode="after")
    def _one_answer(self) -> ToolResultCase:
        if self.error is not None and "result" in self.model_fields_set:
            raise ValueError("a results entry answers with result or error, not both")
        return self


class ModelToolSpec(Strict):
    """A tool offered to the model, and how tamesu answers it."""

    name: str
    """The tool's name, as the model calls it."""
    description: str = ""
    """What the tool does, as the model is told."""
    parameters: ToolParameters = Field(default_factory=_no_parameters)
    """The JSON schema of the arguments, as the provider's function-calling API takes it."""
    result: object = None
    """What every call returns (a string, or JSON), unless a `results` entry matches first; rendered as a template."""
    results: list[ToolResultCase] = Field(default_factory=list)
    """Results by the call's arguments: the first entry whose `when` matches answers the call."""
    error: str | None = None
    """Make every call fail with this message (unless a `results` entry matches first)."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _TOOL_NAME.match(value):
            raise ValueError("a tool name is 1 to 64 letters, digits, _ or -")
        return value

    @model_validator(mode="after")
    def _one_answer(self) -> ModelToolSpec:
        if self.error is not None and "result" in self.model_fields_set:
            raise ValueError(f"tool {self.name} answers with result or error, not both")
        return self

    def offered(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


class ModelTargetSpec(TargetSpec):
    model: str | ModelSpec | None = None
    """A name under `models:`, a shorthand (`openai:gpt-4o-mini`) or a mapping; default `models.target`."""
    system: str | None = None
    """The system prompt the model under test is given; templates allowed."""
    system_file: str | None = None
    """A file holding the system prompt, relative to the suite."""
    tools: list[ModelToolSpec] = Field(default_factory=list)
    """The tools offered to the model, each with how tamesu answers its calls (`result`, `results`, `error`)."""
    temperature: YamlFloat | None = Field(None, ge=0, le=2)
    """Sampling temperature (0-2) of the model under test; default the model's own setting."""
    max_tokens: YamlInt | None = Field(None, ge=1)
    """The most tokens the model may answer a turn with; default the model's own setting."""
    max_tool_rounds: YamlInt = Field(5, ge=0, le=100)
    """How many times per turn the model's tool calls are answered before the turn fails."""
    fallback: str | ModelSpec | None = None
    """Another model, asked when `model` still fails after its retries."""

    def streams_replies(self) -> bool:
        return False  # a model's answer is read whole: it has no first token

    def declared_tools(self) -> list[str] | None:
        return [tool.name for tool in self.tools]  # the model is offered these and no other

    @model_validator(mode="after")
    def _coherent(self) -> ModelTargetSpec:
        if self.system is not None and self.system_file is not None:
            raise ValueError("system and system_file both give the system prompt: keep one")
        names = [tool.name for tool in self.tools]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"tool {twice[0]} is declared twice")
        return self
