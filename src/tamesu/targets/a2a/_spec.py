"""The keys of an `a2a` target, as a user writes them. Documented key by key in `tamesu.targets.a2a`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tamesu.errors import InfraError
from tamesu.net.grpc_channels import PLAINTEXT_TLS, tls_on_plaintext
from tamesu.targets.base import TargetSpec
from tamesu.types import HostPort, HttpHeaders, Strict, YamlBool, YamlInt, fixed_port

Binding = Literal["jsonrpc", "http", "grpc"]
URL_SCHEMES = ("http://", "https://", "grpc://", "grpcs://")


class PushSpec(Strict):
    """Where the push listener binds, and the URL the agent is told to post to (a tunnel, a proxy)."""

    addr: HostPort | None = None
    """host:port to bind; default 127.0.0.1 on a free port. Runs whose listener binds a fixed port are made one at
    a time under --parallel, as those of remote agents on a fixed `addr`."""
    url: str | None = None
    """The URL the agent posts notifications to; default the listener's own http://host:port/a2a/push. Needs
    `addr`: the url leads to a fixed port, not to the free one the listener takes without it."""

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("{{", "http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _url_needs_addr(self) -> PushSpec:
        # a tunnel or proxy leads to a fixed local port: beside a free one, every notification went nowhere and
        # the run passed, each turn only slower through the fallback tasks/get
        if self.url is not None and fixed_port(self.addr) is None:
            raise ValueError("url needs addr: the port the url leads to, where the listener binds (without "
                             "addr, or with port 0, it takes a free port, which the url cannot know)")
        return self


class A2ASpec(TargetSpec):
    url: str
    """The JSON-RPC endpoint, the base of the HTTP+JSON binding, or grpc://host:port (grpcs:// for TLS)."""
    transport: Binding | None = None
    """The A2A binding to use (`jsonrpc`, `http`, `grpc`); default the card's preferred one when the card is about
    this url, else `grpc` for a grpc:// or grpcs:// url, else `jsonrpc`. A binding the card lists at another URL
    is spoken there."""
    headers: HttpHeaders = Field(default_factory=dict)
    """HTTP headers (gRPC metadata) sent with every request; templates allowed."""
    stream: YamlBool = False
    """Send with `message/stream` and read the streamed events (time to first token), instead of `message/send`."""
    push: YamlBool | PushSpec = False
    """Receive the task's updates as push notifications: `true`, or where the listener binds and the URL the agent
    posts to."""
    skill: str | None = Field(None, min_length=1)
    """The agent card's skill the tests exercise (id or name): a card without it is an error (exit 3) naming the
    skills it has, and saying so when the card offers an authenticated extended card that `headers` without
    credentials leave unread; `tamesu coverage` counts it."""
    metadata: dict[str, object] = Field(default_factory=dict)
    """Metadata sent with every message (templates allowed)."""
    rate_limit_retries: YamlInt = Field(3, ge=0, le=10)
    """How often an HTTP request the agent answered 429 (too many requests) is sent again, after its Retry-After
    (at most 30 s) or a doubling `connect.backoff`; still 429 after them is an infrastructure error (exit 3).
    0 takes a 429 as the agent's error. gRPC's RESOURCE_EXHAUSTED is the agent's answer, never sent again."""

    @model_validator(mode="before")
    @classmethod
    def _plaintext(cls, data: object) -> object:
        return tls_on_plaintext(data)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        if not value.startswith(("{{", *URL_SCHEMES)):  # said at the url, not at the target's name
            raise ValueError("url must start with http://, https://, grpc:// or grpcs://")
        # tls: serves the card's https:// and a grpcs:// channel; on grpc:// it would be dropped without a word
        tls = info.data.get("tls")
        if tls is not None and value.startswith("grpc://"):
            raise ValueError(PLAINTEXT_TLS)
        return value

    @model_validator(mode="after")
    def _coherent(self) -> A2ASpec:
        if self.stream and self.push_spec is not None:
            raise ValueError("stream and push are two ways to follow a task: keep one")
        return self

    def streams_replies(self) -> bool:
        return self.stream  # message/send answers whole: only message/stream has a first token

    def fixed_addrs(self) -> frozenset[str]:
        push = self.push_spec
        if push is None or push.addr is None or fixed_port(push.addr) is None:
            return frozenset()
        return frozenset({push.addr})

    @property
    def push_spec(self) -> PushSpec | None:
        if self.push is False:
            return None
        return PushSpec() if self.push is True else self.push


def check_rendered_url(url: str, written: str, what: str, mask: Callable[[str], str], tls: bool = False) -> None:
    """A url written as a template (`{{env.AGENT_URL}}`, `{{remote.X.grpc}}`: a bare host:port) that rendered
    without a scheme: an infrastructure error saying where, not the agent's error (the SDK's "scheme ''"); so is
    a grpc:// one on a target with a `tls:` block (`tls`), which validation could not see."""
    if not url.startswith(URL_SCHEMES):
        raise InfraError(f"{what}: url {mask(url)!r} (from {written!r}) must start with http://, https://, grpc:// "
                         "or grpcs:// (a remote agent's gRPC address is grpc://{{remote.NAME.grpc}})")
    if tls and url.startswith("grpc://"):
        raise InfraError(f"{what}: url {mask(url)!r} (from {written!r}): {PLAINTEXT_TLS}")
