"""The cards of a remote agent: the public one, and the authenticated extended one when `extended` is given.

Every binding is listed for both protocol versions, 1.0 first (clients take the first interface they speak):
JSON-RPC at the agent's URL, HTTP+JSON at the same origin (0.3 clients add `/v1`), and gRPC on its own port.
The 1.0 gRPC interface is a bare host:port, the form the A2A SDKs write and hand to their gRPC libraries
(a2a-sdk with grpc's channel, the JavaScript SDK with grpc-js). The 0.3 one must also be read by the A2A
TCK's 0.3 client, which takes `hostname:port` out of the URL as `urllib.parse` reads it (a bare host:port is
`None:80` to it) while grpc and grpc-js read an `http://` or `grpc://` URL as a DNS name they cannot dial.
`dns://HOST:PORT/HOST:PORT` is the one form all three dial: gRPC's own target syntax (a `dns` name whose
authority, the DNS server, is never asked because the host is an IP literal), and a URL whose hostname and
port are the server's (docs/reliability.md has the measurements).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from tamesu.suite.remote_agents import RemoteAgentSpec

BEARER = "bearer"


@dataclass(frozen=True)
class Addresses:
    origin: str
    """http://host:port: the agent's URL, its JSON-RPC endpoint and the base of HTTP+JSON."""
    grpc: str
    """host:port of the gRPC server."""

    def interfaces(self) -> list[AgentInterface]:
        listed: list[AgentInterface] = []
        for version in ("1.0", "0.3"):
            listed += [
                AgentInterface(url=self.origin, protocol_binding="JSONRPC", protocol_version=version),
                AgentInterface(url=self.origin, protocol_binding="HTTP+JSON", protocol_version=version),
            ]
            if self.grpc:  # none for a forwarding agent, which relays HTTP only
                url = self.grpc if version == "1.0" else grpc_url_03(self.grpc)
                listed.append(AgentInterface(url=url, protocol_binding="GRPC", protocol_version=version))
        return listed


def grpc_url_03(host_port: str) -> str:
    """The 0.3 card's gRPC URL for a server at `host_port` (see the module's docstring). Only an IP literal
    is safe in the dns form, whose authority would be asked to resolve a name: a named host stays bare."""
    host = host_port.rsplit(":", 1)[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host_port
    return f"dns://{host_port}/{host_port}"


def _skill(name: str) -> AgentSkill:
    return AgentSkill(id=name, name=name, description=f"{name} (scripted by tamesu)", tags=[name],
                      input_modes=["text/plain", "application/json"],
                      output_modes=["text/plain", "application/json"])


def public_card(name: str, spec: RemoteAgentSpec, at: Addresses, token: str | None) -> AgentCard:
    return _card(name, spec.skills, spec.description or f"{name}: a remote agent played by tamesu", spec, at,
                 token)


def extended_card(name: str, spec: RemoteAgentSpec, at: Addresses, token: str | None) -> AgentCard | None:
    if spec.extended is None:
        return None
    skills = [*spec.skills, *(s for s in spec.extended.skills if s not in spec.skills)]
    description = spec.extended.description or spec.description or f"{name}: a remote agent played by tamesu"
    return _card(name, skills, description, spec, at, token)


def _card(name: str, skills: list[str], description: str, spec: RemoteAgentSpec, at: Addresses,
          token: str | None) -> AgentCard:
    card = AgentCard(
        name=name, description=description, version="1.0.0",
        supported_interfaces=at.interfaces(),
        capabilities=AgentCapabilities(streaming=True, push_notifications=True,
                                       extended_agent_card=spec.extended is not None),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        # a card must list skills (the SDK warns on every use of one without): the agent's name stands in
        skills=[_skill(s) for s in skills or [name]],
    )
    if token:
        # declared and required: the agent under test should see from the card that it must authenticate
        card.security_schemes[BEARER].CopyFrom(SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")))
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList()}))
    return card
