"""What a user writes for a `sip` target."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tamesu.targets.base import TargetSpec
from tamesu.targets.realtime.spec import require_audio_extra
from tamesu.types import Duration, Strict, YamlBool, YamlInt

_SIP_URI = re.compile(r"^\s*(?:(?:sips?|tel):\S+|(?:\"[^\"]*\"|[^<\"]*)\s*<(?:sips?|tel):[^>]+>)\s*$")
"""A caller identity PJSIP takes: a SIP URI, or one in angle brackets after a display name."""
_TOKEN = re.compile(r"[A-Za-z0-9.!%*_+`'~-]+")
"""RFC 3261's token: what a header's name is made of."""


class TrunkSpec(Strict):
    """Where calls go when `to` is a number: a SIP trunk (or a PBX), with its credentials."""

    model_config = ConfigDict(**{**Strict.model_config, "populate_by_name": True})

    host: str
    """The trunk's host name or address."""
    port: YamlInt = Field(5060, ge=1, le=65535)
    """The trunk's SIP port."""
    transport: Literal["udp", "tcp"] = "udp"
    """SIP over `udp` or `tcp`."""
    username: str | None = None
    """The digest user name, when the trunk asks for credentials."""
    password: str | None = None
    """Digest credentials, usually `{{secrets.X}}`."""
    realm: str = "*"
    """The digest realm the credentials are for; `*` any."""
    register_: YamlBool = Field(False, alias="register")
    """REGISTER with the trunk before calling (most trunks take calls from a known address without it); with the
    credentials when there are any."""


class TriggerSpec(Strict):
    """What makes the agent call tamesu (inbound): an HTTP request or a command."""

    http: dict[str, Any] | None = None
    """`{url, method (POST), headers, body}`; `{{session.uri}}` is where tamesu answers."""
    run: str | None = None
    """A shell command; `{{session.uri}}` is where tamesu answers."""
    timeout: Duration = Field(10.0, gt=0)
    """How long the trigger's request or command may take."""

    @model_validator(mode="after")
    def _one(self) -> TriggerSpec:
        if (self.http is None) == (self.run is None):
            raise ValueError("a trigger is either http: {...} or run: \"command\"")
        return self


class SipSpec(TargetSpec):
    direction: Literal["outbound", "inbound"] = "outbound"
    """`outbound`: tamesu calls the agent at `to`; `inbound`: the agent calls tamesu, made to by `trigger`."""
    to: str | None = None
    """outbound: the agent's SIP URI (`sip:agent@host:port`), or a number dialled through `trunk`."""
    from_: str | None = Field(None, alias="from")
    """The caller identity tamesu presents (`sip:+15551234@example.com`)."""
    trunk: TrunkSpec | None = None
    """A SIP trunk or PBX that `to`, a number, is dialled through (with its credentials)."""
    inbound_number: str = "tamesu"
    """inbound: the user part tamesu answers as (`sip:<inbound_number>@<listen>`)."""
    trigger: TriggerSpec | None = None
    """inbound: what makes the agent call (an HTTP request or a command), with `{{session.uri}}` to call."""
    listen: str = "127.0.0.1:0"
    """The local SIP address (host:port; port 0 picks a free one)."""
    answer_after: Duration = 0.5
    """inbound: how long tamesu lets the call ring before it answers."""
    ring_timeout: Duration = Field(30.0, gt=0)
    """How long a call may ring (outbound: before the agent answers; inbound: before the agent calls) before the run
    ends with `no_answer`."""
    max_duration: Duration = Field(300.0, gt=0)
    """The longest a call may last; tamesu hangs up then."""
    idle: Duration = 1.2
    """Silence after the agent's speech that ends its turn."""
    greeting: YamlBool = True
    """Wait for the agent to speak first (an IVR's welcome) and make that the first agent turn."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra SIP headers on the INVITE (outbound)."""

    model_config = ConfigDict(**{**TargetSpec.model_config, "populate_by_name": True})

    @model_validator(mode="after")
    def _audio_available(self) -> SipSpec:
        require_audio_extra()  # the voice extra is imported only as a turn is heard: say so up front
        return self

    @model_validator(mode="after")
    def _direction(self) -> SipSpec:
        if self.direction == "outbound" and not self.to:
            raise ValueError("an outbound sip target needs `to` (the agent's SIP URI or a number)")
        if self.direction == "inbound" and self.trigger is None:
            raise ValueError("an inbound sip target needs a `trigger` that makes the agent call")
        if self.to and not self.to.startswith(("sip:", "sips:", "{{")) and self.trunk is None:
            raise ValueError(f"`to: {self.to}` is not a SIP URI; give a `trunk` to dial a number through")
        return self

    @field_validator("from_")
    @classmethod
    def _caller_uri(cls, value: str | None) -> str | None:
        # PJSIP refused it as the call's "Invalid URI", which read as `to`'s fault
        if value is not None and "{{" not in value and not _SIP_URI.search(value):
            raise ValueError(f"{value!r} is not a SIP URI: write sip:+15550100@example.com, tel:+15550100, or "
                             "\"Name\" <sip:+15550100@example.com>")
        return value

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        # a name with a space or a value across lines made an INVITE a strict server answers 400 Bad Request
        for name, value in headers.items():
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"{name!r} is not a SIP header name (letters, digits and -.!%*_+`'~, no spaces)")
            if "\r" in value or "\n" in value:
                raise ValueError(f"the header {name}'s value spans lines; a SIP header's value is one line")
        return headers

    def dial_uri(self, to: str) -> str:
        """Where to send the INVITE; raises ValueError when `to` (as rendered) is neither a URI nor a number
        with a trunk to dial it through."""
        if to.startswith(("sip:", "sips:")):
            return to
        if self.trunk is None or not to.strip():
            raise ValueError(f"`to` is {to!r}: not a SIP URI, and no trunk to dial it through")
        suffix = ";transport=tcp" if self.trunk.transport == "tcp" else ""
        return f"sip:{to}@{self.trunk.host}:{self.trunk.port}{suffix}"
