"""`hooks:`, in a suite or tamesu.yaml: commands and HTTP requests run around tests (`tamesu.engine.hooks`)."""

from __future__ import annotations

import re
import typing

from pydantic import Field, ModelWrapValidatorHandler, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

# the `tls:` block as a model's (`tamesu.net.tls`): a suite describes, it does not import what connects
from tamesu.models.spec import TlsSpec
from tamesu.types import Duration, HttpHeaders, Strict, YamlInt

_METHOD = re.compile(r"[A-Z]+")
_SCHEMES = ("http://", "https://")
_INVALID = object()
_ONE_KIND = "a hook is either run: <command> or http: {url, ...}"


class HttpRequestSpec(Strict):
    url: str
    """Where the request goes; templates allowed."""
    method: str = "GET"
    """The HTTP method."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Headers sent with the request; templates allowed (`{{secrets.NAME}}`)."""
    body: object = None
    """The JSON body sent, templates rendered in every string; none sends no body."""
    timeout: Duration = Field(30.0, gt=0)
    """How long the whole request may take."""
    expect_status: list[YamlInt] | YamlInt | None = None
    """The status code(s) that count as success; default any 2xx."""
    tls: TlsSpec | None = None
    """Trust and a client certificate for an HTTPS hook, as a target's `tls:` block (`tamesu.net.tls`)."""

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        return http_method(value)


def http_method(value: str) -> str:
    """`value` as the method sent (upper-case); a method no server takes (`GE T`) was each run's error ('Method
    cannot contain non-token characters', exit 3): a problem where written."""
    if not _METHOD.fullmatch(value.upper()):
        raise ValueError(f"expected an HTTP method such as GET or POST, got {value!r}")
    return value.upper()


def http_url(value: str) -> str:
    """A URL a request is sent to as written: one that names no http(s) server (`ftp://`, a path alone, `not a
    url`) was each run's error, 'the URL's scheme is not http(s)', exit 3. One a template begins is whole only
    when it runs."""
    if not value.lower().startswith((*_SCHEMES, "{{")):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value


class HookRequestSpec(HttpRequestSpec):
    """A hook's request: its URL is whole (a session.open's may be a path on its target's host)."""

    @field_validator("url")
    @classmethod
    def _whole(cls, value: str) -> str:
        return http_url(value)


class HookSpec(Strict):
    """A command (`run`) or an HTTP request (`http`) run around tests."""

    run: str | None = None
    """A shell command; templates allowed."""
    http: HookRequestSpec | None = None
    """An HTTP request instead of a command."""
    timeout: Duration = Field(60.0, gt=0)
    """How long the command may run; beside `http:`, how long the request may take (its own `timeout` too)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the command; templates allowed."""

    @field_validator("env")
    @classmethod
    def _command_only(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        # an `http:` that failed its own checks is missing from `info.data` (one not written is there, None): it
        # was written all the same, so its env is said with its problems, not only once they are fixed
        if value and info.data.get("http", _INVALID) is not None:
            raise ValueError("env is a command's environment: an http: hook sends none (put values in its url, "
                             "headers or body)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        # a before-validator: the exported JSON schema takes a string for the hook from it (`cli.schema_export`)
        return {"run": value} if isinstance(value, str) else value

    @model_validator(mode="wrap")
    @classmethod
    def _one_kind(cls, value: object, handler: ModelWrapValidatorHandler[HookSpec]) -> HookSpec:
        value = {"run": value} if isinstance(value, str) else value  # whichever of the two runs first
        # told from what was written, so a hook with both kinds (or neither) says so beside its other problems,
        # not only once they are fixed (an after-validator runs only on a hook that is otherwise valid)
        wrong = isinstance(value, dict) and (value.get("run") is None) == (value.get("http") is None)
        try:
            hook = handler(value)
        except ValidationError as error:
            if not wrong:
                raise
            raise ValidationError.from_exception_data(error.title, [
                *typing.cast(list[InitErrorDetails], error.errors(include_url=False)),
                InitErrorDetails(type=PydanticCustomError("value_error", _ONE_KIND), loc=(), input=value)]) from None
        if wrong:
            raise ValueError(_ONE_KIND)
        return hook


class HooksSpec(Strict):
    before_all: list[HookSpec] = Field(default_factory=list)
    """Run once before the first test of the suite (or of the project, in tamesu.yaml)."""
    after_all: list[HookSpec] = Field(default_factory=list)
    """Run once after the last test, a failed run's too."""
    before_each: list[HookSpec] = Field(default_factory=list)
    """Run before every run of every test."""
    after_each: list[HookSpec] = Field(default_factory=list)
    """Run after every run of every test, a failed one's too."""
