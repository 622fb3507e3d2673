"""The keys of one entry of a suite's `remote_agents:`, as a user writes them."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

# the `tls:` block as a target's (`tamesu.net.tls`): a suite describes, it does not import what connects
from tamesu.matching import quoted
from tamesu.models.spec import TlsSpec
from tamesu.suite.patterns import Pattern
from tamesu.types import HostPort, HttpHeaders, Strict

ReplyState = Literal["completed", "input-required", "auth-required", "failed", "rejected"]
"""The states a scripted reply may leave its task in (the task settles in each of them)."""


class ReplySpec(Strict):
    """One scripted answer: used when `when` (a regex searched in the message's text) matches."""

    when: Pattern | None = None
    """A regular expression searched in the delegated message (its text, then its data as JSON); none: always."""
    say: str | None = None
    data: Any = None
    """Answered as a data part beside the text."""
    state: ReplyState = "completed"

    @model_validator(mode="after")
    def _answers(self) -> ReplySpec:
        if self.say is None and "data" not in self.model_fields_set:
            raise ValueError("a reply needs say or data")
        return self


class ExtendedSpec(Strict):
    """What the authenticated extended card adds: more skills, another description."""

    skills: list[str] = Field(default_factory=list)
    description: str | None = None


class RemoteAgentSpec(Strict):
    """A scripted A2A agent that tamesu serves for every run, for the agent under test to delegate to."""

    description: str | None = None
    skills: list[str] = Field(default_factory=list)
    reply: str = "OK"
    """The answer when no entry of `replies` matches."""
    replies: list[ReplySpec] = Field(default_factory=list)
    """Tried in order; the first whose `when` matches answers."""
    extended: ExtendedSpec | None = None
    token: str | None = None
    """Every request (but the public card) needs `Authorization: Bearer <token>`; templates allowed."""
    addr: HostPort | None = None
    """host:port for the HTTP side (a fixed port the agent under test is configured with); default a free port.
    The gRPC side always takes a free port, named on the card."""
    forward: str | None = None
    """The URL of a real A2A agent (its JSON-RPC endpoint or HTTP+JSON base, or grpc(s)://host:port for one
    reached over gRPC): this agent then forwards every request of that binding to it and relays the answer
    unchanged, recording each message as a delegation; templates allowed. `skills` are then only used when
    `fuzz_tools` names this agent and the real agent's card cannot be read; `reply` and `replies` are refused
    (the real agent answers, and fuzz_tools' modes with their own words)."""
    headers: HttpHeaders = Field(default_factory=dict)
    """With `forward`: headers added to every forwarded request (the real agent's credentials); templates
    allowed."""

    tls: TlsSpec | None = None
    """With an https:// or grpcs:// `forward`: trust and a client certificate for the connection to the real
    agent, as a target's `tls:` block (`ca_file`, `cert_file` + `key_file`, `server_name`, `verify`)."""

    @field_validator("forward")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # a template is checked once rendered, when the run starts
        if value is None or "{{" in value:
            return value
        if re.match(r"(?i)grpcs?://", value):
            if not re.fullmatch(r"(?i)grpc://[^/\s]+:\d+/?|grpcs://[^/\s]+(:\d+)?/?", value):
                raise ValueError(f"forward: expected grpc://host:port or grpcs://host[:port] (a gRPC agent is "
                                 f"reached at an address, not a path), got {quoted(value)}")
        elif not re.match(r"(?i)https?://[^/\s]+", value):
            raise ValueError(f"forward: expected an http://, https://, grpc:// or grpcs:// URL, got {quoted(value)}")
        return value

    @model_validator(mode="after")
    def _headers_need_forward(self) -> RemoteAgentSpec:
        if self.headers and self.forward is None:
            raise ValueError("headers only apply with forward: the headers sent to the real agent")
        if self.tls is not None:
            if self.forward is None:
                raise ValueError("tls only applies with forward: the connection to the real agent")
            if problem := forward_tls_problem(self.forward, self.tls):
                raise ValueError(problem)
        if self.forward is not None and ("reply" in self.model_fields_set or self.replies):
            raise ValueError("reply and replies do not apply with forward: the real agent answers (and with "
                             "fuzz_tools naming this agent, the fuzz mode's own words)")
        return self

    def answer(self, text: str) -> ReplySpec:
        for reply in self.replies:
            if reply.when is None or re.search(reply.when, text):
                return reply
        return ReplySpec(say=self.reply)


def forward_tls_problem(forward: str, tls: TlsSpec) -> str | None:
    """Why a `tls:` block cannot apply to `forward` (checked again once a template renders), or None."""
    scheme = forward.lower().partition("://")[0]
    if scheme in ("http", "grpc"):
        return (f"tls is for an https:// or grpcs:// forward: {scheme}:// is plaintext, and the block would be "
                "used for nothing")
    return None
