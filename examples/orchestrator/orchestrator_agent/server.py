"""The orchestrator's own A2A server: a card and JSON-RPC at /a2a, A2A 1.0 and 0.3."""

from __future__ import annotations

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

from orchestrator_agent.executor import OrchestratorExecutor


def card(url: str) -> AgentCard:
    return AgentCard(
        name="Support orchestrator", version="1.0.0",
        description="Customer support that hands refunds to billing and tracking to shipping.",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v)
                              for v in ("1.0", "0.3")],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="support", name="Support", description="Refunds, invoices and order tracking",
                           tags=["support"])],
    )


def app(origin: str) -> Starlette:
    url = f"{origin}/a2a"
    handler = DefaultRequestHandler(agent_executor=OrchestratorExecutor(), task_store=InMemoryTaskStore(),
                                    agent_card=card(url))
    routes = [*create_agent_card_routes(card(url))]
    for path in ("/a2a", "/a2a/"):
        routes += create_jsonrpc_routes(handler, path, enable_v0_3_compat=True)
    return Starlette(routes=routes)
