"""The keys of an `mcp` target, as a user writes them. Documented in `tamesu.targets.mcp.target`."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tamesu.targets.model import ModelTargetSpec
from tamesu.types import Duration, HttpHeaders, YamlInt


class McpTargetSpec(ModelTargetSpec):
    """The model target's keys (model, system, temperature...) plus where the server is."""

    command: str | None = None
    """A stdio MCP server: the command tamesu starts for each run (with `args` and `env`)."""
    args: list[str] = Field(default_factory=list)
    """The stdio server's arguments; templates allowed."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the stdio server, over tamesu's own; templates allowed (`{{secrets.X}}`)."""
    url: str | None = None
    """A Streamable HTTP MCP server's endpoint (instead of `command`)."""
    headers: HttpHeaders = Field(default_factory=dict)
    """HTTP headers sent to the HTTP server; templates allowed."""
    allow_tools: list[str] | None = None
    """Names (or `*` globs) of the server's tools the model is offered; default all of them."""
    call_timeout: Duration = 30.0
    """How long one tool call to the server may take; a call past it is answered to the model as an error."""
    rate_limit_retries: YamlInt = Field(3, ge=0, le=10)
    """How often a request the HTTP server answered 429 (too many requests) is sent again, after its Retry-After
    (at most 30 s) or a doubling `connect.backoff`, a `rate_limited` event each; 0 takes the 429 as the
    server's answer."""

    def declared_tools(self) -> list[str] | None:
        return None  # the server's, listed as a run opens (`checks.tools` refuses a name none of them is)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().startswith(("{{", "http://", "https://")):
            raise ValueError("an mcp url is http:// or https:// (the server's streamable HTTP endpoint)")
        return value

    @model_validator(mode="after")
    def _reachable(self) -> McpTargetSpec:
        if "tools" in self.model_fields_set:
            raise ValueError("an mcp target's tools come from its server; narrow them with allow_tools")
        if self.command is None and self.url is None:
            raise ValueError("an mcp target needs command (a server over stdio) or url (streamable HTTP)")
        if self.command is None and (self.args or self.env):
            raise ValueError("args and env go with command")
        if self.url is None and self.headers:
            raise ValueError("headers go with url")
        if self.call_timeout <= 0:
            raise ValueError("call_timeout must be more than 0")
        written = " ".join(map(str, [self.command or "", *self.args, *self.env.values(), self.url or ""]))
        if re.search(r"\{\{\s*session\.port\s*\}\}", written) and (self.command is None or self.url is None):
            raise ValueError("{{session.port}} is the free port of a server tamesu starts and reaches over HTTP: "
                             "it needs both command and url")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"
