"""What a user writes for a `realtime` target, and how its `tool_results` answer the agent's calls."""

from __future__ import annotations

import json
from typing import Literal, Protocol, TypeGuard

from pydantic import Field, ValidationError, field_validator, model_validator

from tamesu.errors import TemplateError
from tamesu.matching import args_problem
from tamesu.suite.templates import Context
from tamesu.targets.base import TargetSpec
from tamesu.targets.model import ToolResultCase
from tamesu.types import HttpHeaders, YamlInt

# the GA protocol's audio formats: pcm16 at 24 kHz, G.711 at 8 kHz
AUDIO_FORMATS: dict[str, tuple[str, str, int]] = {
    "pcm16": ("audio/pcm", "pcm16", 24000),
    "g711_ulaw": ("audio/pcmu", "mulaw", 8000),
    "g711_alaw": ("audio/pcma", "alaw", 8000),
}
_CASE_KEYS = {"when", "result", "error"}


def _is_cases(value: object) -> TypeGuard[list[dict[str, object]]]:
    """A list of `{when, result|error}` entries (not a result that happens to be a list)."""
    return (isinstance(value, list) and bool(value)
            and all(isinstance(v, dict) and v and set(v) <= _CASE_KEYS for v in value))


class RealtimeSpec(TargetSpec):
    url: str
    """ws:// or wss:// URL of the Realtime endpoint (the API's, or your own server's)."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Headers on the websocket handshake (`Authorization: Bearer {{secrets.OPENAI_API_KEY}}`)."""
    model: str | None = None
    """Sent as `?model=` unless the URL has one."""
    session_update: dict[str, object] = Field(default_factory=dict)
    """Merged into the `session.update` tamesu sends (instructions, tools, voice...); yours wins."""
    tool_results: dict[str, object] = Field(default_factory=dict)
    """tool name: its result (any JSON), or a list of `{when: {arg: value|regex}, result | error}` tried in
    order, as the model target's `results`. Results are templates with `{{args.x}}`."""
    done_tool: str | None = None
    """A function call of this name ends the conversation (after it is recorded)."""
    mode: Literal["text", "audio"] = "text"
    """`text`: text turns and text answers; `audio`: the persona speaks into the input audio buffer and the agent's
    audio is heard."""
    audio_format: Literal["pcm16", "g711_ulaw", "g711_alaw"] = "pcm16"
    """The audio format both ways in audio mode (`pcm16` at 24 kHz, or G.711 u-law / a-law at 8 kHz)."""
    turn_detection: Literal["commit", "server_vad"] = "commit"
    """audio mode: tamesu commits the buffer and asks for a response after each utterance, or the agent's
    server VAD decides when the user finished."""
    max_responses: YamlInt = Field(8, ge=1, le=100)
    """Responses per turn (each tool round asks for one) before the turn fails."""

    @field_validator("url")
    @classmethod
    def _websocket(cls, url: str) -> str:
        return websocket_url(url, "a realtime url is ws:// or wss://")

    @field_validator("tool_results")
    @classmethod
    def _cases(cls, results: dict[str, object]) -> dict[str, object]:
        return check_tool_results(results)

    @model_validator(mode="after")
    def _audio_available(self) -> RealtimeSpec:
        audio_mode_available(self.mode)
        return self

    def format_type(self) -> str:
        return AUDIO_FORMATS[self.audio_format][0]


class ToolResults(Protocol):
    """A target spec whose `tool_results` answer the agent's function calls (realtime, pipecat)."""

    tool_results: dict[str, object]


def websocket_url(url: str, problem: str) -> str:
    """A validator's check of a websocket target's `url`: ws://, wss://, or a template filled in later."""
    if not (url.startswith(("ws://", "wss://")) or url.startswith("{{")):
        raise ValueError(problem)
    return url


def audio_mode_available(mode: str) -> None:
    """`mode: audio` needs the audio extra: a validator's error naming what is missing."""
    if mode == "audio":
        require_audio_extra("mode: audio: ")


def require_audio_extra(prefix: str = "") -> None:
    """A validator's error naming what of the audio extra is missing (an audio-only target's, unprefixed)."""
    from tamesu.audio.extra import problem

    missing = problem()
    if missing:
        raise ValueError(f"{prefix}{missing}")


def check_tool_results(results: dict[str, object]) -> dict[str, object]:
    """`tool_results` as a validator sees it: each list of cases must be valid cases."""
    for name, value in results.items():
        for index, case in enumerate(value if _is_cases(value) else []):
            try:
                ToolResultCase.model_validate(case)
            except ValidationError as exc:  # its first problem on one line (pydantic's own text spans several)
                error = exc.errors()[0]
                where = ".".join(str(part) for part in error["loc"])
                why = str(error["msg"]).removeprefix("Value error, ")
                said = why if not where or why.startswith(where) else f"{where}: {why}"
                raise ValueError(f"{name}[{index}]: {said}") from None
    return results


def answer(spec: ToolResults, name: str, args: dict[str, object], context: Context) -> tuple[object, bool]:
    """(the output for this call, whether tamesu declared it): the first matching `when`, else the result."""
    if name not in spec.tool_results:
        return {"error": f"no result declared for tool {name} (tool_results)"}, False
    value = spec.tool_results[name]
    scoped = context.child(args=args)
    if _is_cases(value):
        for raw in value:
            case = ToolResultCase.model_validate(raw)
            try:
                expected = scoped.render_value(case.when)
            except TemplateError:
                continue  # a `when` naming a value that does not exist yet cannot match
            if args_problem(expected, args) is None:
                if case.error is not None:
                    return {"error": scoped.render_text(case.error)}, True
                return scoped.render_value(case.result), True
        return {"error": "no result declared for these arguments"}, True
    return scoped.render_value(value), True


def as_output(value: object) -> str:
    """A function_call_output's `output` is a string: JSON for anything but a string."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
