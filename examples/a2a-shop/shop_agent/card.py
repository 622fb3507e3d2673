"""The shop's agent cards: the public one, and the extended one a bearer token unlocks (one more skill).

Every binding is listed for both protocol versions, A2A 1.0 first (clients and the A2A TCK take the first
interface they speak). The SDK adds the 0.3 fields (`url`, `preferredTransport`, `additionalInterfaces`) from
the 0.3 interfaces when it serves the card, so 0.3 clients read the same document.
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

BEARER = "bearer"


@dataclass(frozen=True)
class Endpoints:
    """Where each binding listens. gRPC 1.0 is a bare host:port, as the A2A SDKs write it and their gRPC
    libraries dial it (an http:// or grpc:// URL is read by them as a host name). gRPC 0.3 is
    `dns://HOST:PORT/HOST:PORT`: gRPC's own target syntax, which grpc and grpc-js dial, and a URL whose
    hostname and port the A2A TCK's 0.3 client takes out (a bare host:port is `None:80` to it). The dns
    form's authority names a DNS server, never asked for an IP literal: a named host stays bare."""

    jsonrpc: str
    rest: str
    grpc_host: str
    grpc_port: int
    versions: tuple[str, ...] = ("1.0", "0.3")
    """The protocol versions the card offers. The servers answer both whatever the card says; a card that
    offers only one lets a test make every client speak that one."""

    def interfaces(self) -> list[AgentInterface]:
        grpc_address = f"{self.grpc_host}:{self.grpc_port}"
        listed: list[AgentInterface] = []
        for version in ("1.0", "0.3"):
            if version not in self.versions:
                continue
            grpc_url = grpc_address if version == "1.0" or not _ip_literal(self.grpc_host) else \
                f"dns://{grpc_address}/{grpc_address}"
            listed += [
                AgentInterface(url=self.jsonrpc, protocol_binding="JSONRPC", protocol_version=version),
                AgentInterface(url=self.rest, protocol_binding="HTTP+JSON", protocol_version=version),
                AgentInterface(url=grpc_url, protocol_binding="GRPC", protocol_version=version),
            ]
        return listed


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


ORDER_STATUS = AgentSkill(
    id="order-status", name="Order status",
    description="Where an order is and when it arrives. Answers with an `order` artifact {order_id, status, eta}.",
    tags=["orders", "tracking"], examples=["Where is my order ORD-1001?"],
    input_modes=["text/plain", "application/json"], output_modes=["text/plain", "application/json"],
)
RETURNS = AgentSkill(
    id="returns", name="Returns",
    description="Starts a return; asks which order when it is not given. Takes a data part {order, reason} "
                "and photos of the damage as file parts. Answers with a `return` artifact {rma, order_id}.",
    tags=["returns"], examples=["I want to return my order", "Here is a photo of the damaged pair"],
    input_modes=["text/plain", "application/json", "image/jpeg", "image/png"],
    output_modes=["text/plain", "application/json"],
)
ORDER_HISTORY = AgentSkill(
    id="order-history", name="Order history",
    description="The signed-in customer's recent orders, as an `orders` artifact. Needs the bearer token.",
    tags=["orders", "account"], examples=["Show my recent orders"],
    input_modes=["text/plain"], output_modes=["text/plain", "application/json"],
    security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
)


def public_card(endpoints: Endpoints) -> AgentCard:
    return _card(endpoints, [ORDER_STATUS, RETURNS],
                 "A small shop assistant: order status and returns. Sign in for your order history.")


def extended_card(endpoints: Endpoints) -> AgentCard:
    return _card(endpoints, [ORDER_STATUS, RETURNS, ORDER_HISTORY],
                 "A small shop assistant for signed-in customers: order status, returns and order history.")


def _card(endpoints: Endpoints, skills: list[AgentSkill], description: str) -> AgentCard:
    return AgentCard(
        name="A2A Shop",
        description=description,
        version="1.0.0",
        supported_interfaces=endpoints.interfaces(),
        capabilities=AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True),
        # declared, not required: only the extended card and the order-history skill need it
        security_schemes={BEARER: SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="Bearer", description="The shop's customer token (SHOP_A2A_TOKEN)"))},
        default_input_modes=["text/plain", "application/json", "image/jpeg", "image/png"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
