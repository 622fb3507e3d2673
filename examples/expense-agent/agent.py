"""A small expense assistant over REST, for tamesu's JSONL tests: it files expenses and explains the policy.

POST /chat   {"message": str, "session_id": str, "messages"?: [{role, content}]}
          -> {"text", "awaiting_input", "input_hint", "tool_calls", "expense", "stage"}
GET  /expenses/{id}   what was filed (the state a test may check after the conversation)

With `messages` (a history sent by a stateless test) the answer is computed from that conversation alone, and the
session goes on from it; without it, from the session's earlier messages. Either way the assistant replays the
user's messages in order through the same steps, so the same conversation always gets the same answer.

The flow: "I want to submit an expense" -> the type is asked; "Business travel, $3500" -> create_expense
(a draft) and a confirmation is asked; "Yes, confirm" -> submit_expense, "Expense submitted. Reference:
EXP-2025-001". More than $10,000 needs a PO number first. "What is the expense policy?" -> get_policy.
Every answer declares `awaiting_input` (and an `input_hint` when it asks for something specific).

Run it: python agent.py --port 8766   (--port 0 picks a free port and prints it)
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

APPROVAL_LIMIT = 10_000
POLICY = (f"Expenses up to $25 need no receipt. Anything over ${APPROVAL_LIMIT:,} needs manager approval "
          "and a PO number. Travel, meals and equipment are covered.")
_AMOUNT = re.compile(r"\$\s?([\d,]+(?:\.\d+)?)")
_PO = re.compile(r"\bPO-\d{3,}\b", re.IGNORECASE)
_TYPES = {"travel": "travel", "flight": "travel", "hotel": "travel", "dinner": "meal", "lunch": "meal",
          "meal": "meal", "equipment": "equipment", "laptop": "equipment", "taxi": "travel"}
_YES = re.compile(r"^\s*(yes|yep|confirm|ok|sure)\b", re.IGNORECASE)
_NO = re.compile(r"^\s*(no|cancel)\b", re.IGNORECASE)


@dataclass
class Conversation:
    """What the assistant knows after some user messages; `step` takes the next one and answers it."""

    stage: str = "idle"
    kind: str | None = None
    amount: int | float | None = None
    filed: int = 0
    expense: dict[str, Any] | None = None
    answer: dict[str, Any] = field(default_factory=dict)

    def step(self, message: str) -> dict[str, Any]:
        text = message.lower()
        amount = _AMOUNT.search(message)
        kind = next((value for word, value in _TYPES.items() if word in text), None)
        if amount:
            value = float(amount.group(1).replace(",", ""))
            self.amount = int(value) if value.is_integer() else value
        if kind:
            self.kind = kind
        if "policy" in text:
            return self._say(POLICY, tools=[_call("get_policy", {}, {"approval_limit": APPROVAL_LIMIT})])
        if self.stage == "confirm" and _YES.match(message):
            return self._submit()
        if self.stage == "confirm" and _NO.match(message):
            self.stage, self.kind, self.amount = "idle", None, None
            return self._say("Cancelled. Is there anything else?", awaiting=True)
        if self.stage == "po":
            po = _PO.search(message)
            if not po:
                return self._say("I need the PO number to go on. Please provide PO number.", awaiting=True,
                                 hint="PO-12345")
            return self._submit(po=po.group(0).upper(), tools=[self._create()])
        if ("receipt" in text or re.search(r"\[[^\]]+\.(jpg|png|pdf|txt)\]", message)) and self.amount is None:
            return self._say("Thanks for the receipt. What is the amount on it?", awaiting=True, hint="$120")
        if self.kind and self.amount is not None:
            return self._draft()
        if self.kind:
            self.stage = "amount"
            return self._say(f"A {self.kind} expense. What was the amount?", awaiting=True, hint="$250")
        if self.amount is not None or re.search(r"expense|reimburs|file|submit|claim", text):
            self.stage = "type"
            return self._say("What type of expense would you like to submit?", awaiting=True,
                             hint="e.g. business travel, $3500")
        if re.search(r"\b(hello|hi|hey)\b", text):
            return self._say("Hi! I can help you submit an expense or explain the expense policy.")
        return self._say("I can submit expenses and explain the expense policy. What would you like to do?",
                         awaiting=True)

    def _draft(self) -> dict[str, Any]:
        assert self.kind is not None and self.amount is not None
        if self.amount > APPROVAL_LIMIT:
            self.stage = "po"
            return self._say("This requires manager approval. Please provide PO number.", awaiting=True,
                             hint="PO-12345")
        self.stage = "confirm"
        shown = f"${self.amount:,.0f}"
        return self._say(f"I'll create an expense for {self.kind}, {shown}. Please confirm.", awaiting=True,
                         tools=[self._create()], hint="yes or no")

    def _create(self) -> dict[str, Any]:
        self.filed += 1
        self.expense = {"id": f"EXP-2025-{self.filed:03d}", "type": self.kind, "amount": self.amount,
                        "status": "draft"}
        return _call("create_expense", {"amount": self.amount, "type": self.kind}, dict(self.expense))

    def _submit(self, po: str | None = None, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        assert self.expense is not None
        self.expense = {**self.expense, "status": "submitted", **({"po": po} if po else {})}
        self.stage, self.kind, self.amount = "idle", None, None
        calls = [*(tools or []), _call("submit_expense", {"id": self.expense["id"]}, {"status": "submitted"})]
        return self._say(f"Expense submitted. Reference: {self.expense['id']}", tools=calls)

    def _say(self, text: str, *, awaiting: bool = False, hint: str | None = None,
             tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        self.answer = {"text": text, "awaiting_input": awaiting, "input_hint": hint, "tool_calls": tools or [],
                       "expense": self.expense, "stage": self.stage}
        return self.answer


def _call(name: str, args: dict[str, Any], result: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "result": result}


def replay(messages: list[str]) -> dict[str, Any]:
    conversation = Conversation()
    for message in messages:
        conversation.step(message)
    return conversation.answer


def create_app() -> Starlette:
    sessions: dict[str, list[str]] = {}
    filed: dict[str, dict[str, Any]] = {}

    async def chat(request: Request) -> Response:
        body = await request.json()
        history = body.get("messages")
        if isinstance(history, list) and history:
            said = [str(m.get("content", "")) for m in history if isinstance(m, dict) and m.get("role") == "user"]
            # the conversation goes on from the history: a next message without one continues it (a multi-turn
            # test that starts from a history sends it with its first turn only)
            sessions[str(body.get("session_id", "default"))] = said
        else:
            said = sessions.setdefault(str(body.get("session_id", "default")), [])
            said.append(str(body.get("message", "")))
        answer = replay(said)
        if answer.get("expense"):
            filed[answer["expense"]["id"]] = answer["expense"]
        return JSONResponse(answer)

    async def expense(request: Request) -> Response:
        found = filed.get(request.path_params["expense_id"].upper())
        return JSONResponse(found or {"error": "not found"}, status_code=200 if found else 404)

    return Starlette(routes=[Route("/chat", chat, methods=["POST"]), Route("/expenses/{expense_id}", expense)])


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=args.port, log_level="warning",
                                           lifespan="off"))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                return
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"expense agent listening on http://127.0.0.1:{port}", flush=True)
        await task

    asyncio.run(serve())
    sys.exit(0)


if __name__ == "__main__":
    main()
