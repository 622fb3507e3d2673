"""What the shop answers, with no protocol in sight: a message in, a reply out.

The executor turns A2A parts into an `Incoming` and a `Reply` into task events, so these rules read like a
clerk's and can change without touching the wire.

    order status   "Where is ORD-1001?"          completed, artifact `order` {order_id, status, eta}
                   "Where is my order?"          input-required "Which order number?", then the answer
    returns        "I want to return ORD-1002"   completed, artifact `return` {rma, order_id}
                   "I want to return something"  input-required "Which order?", then the return
                   data {order, reason}          a return at once, no question
    photos         a file part                   "Thanks, I received NAME", then as a return
    order history  "Show my recent orders"       completed with artifact `orders` when the request carries
                   (the extended card's skill)   the bearer token, else auth-required until it does
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Literal

State = Literal["completed", "input-required", "auth-required"]
Waiting = Literal["order_for_status", "order_for_return", "sign_in"]


@dataclass(frozen=True)
class Order:
    order_id: str
    item: str
    status: str
    eta: str | None

    def as_data(self) -> dict[str, Any]:
        return {"order_id": self.order_id, "status": self.status, "eta": self.eta}


ORDERS: dict[str, Order] = {
    order.order_id: order
    for order in (
        Order("ORD-1001", "blue sneakers", "shipped", "Friday"),
        Order("ORD-1002", "rain jacket", "delivered", None),
        Order("ORD-1003", "wool socks", "processing", "next Tuesday"),
    )
}

_ORDER_ID = re.compile(r"\bORD-\d{4}\b", re.IGNORECASE)
_RETURN = re.compile(r"\b(return|send (it )?back|refund)", re.IGNORECASE)
_HISTORY = re.compile(r"\b(history|my orders|recent orders|past orders)\b", re.IGNORECASE)
_STATUS = re.compile(r"\b(order|where is|status|track)", re.IGNORECASE)
_GOODBYE = re.compile(r"\b(bye|goodbye|that is all|that's all)\b", re.IGNORECASE)


@dataclass(frozen=True)
class FileIn:
    """A file part as the shop sees it: a name, and how much of it arrived (bytes inline, or a link)."""

    name: str
    size: int | None = None
    uri: str | None = None


@dataclass(frozen=True)
class Incoming:
    text: str = ""
    data: list[dict[str, Any]] = field(default_factory=list)
    files: list[FileIn] = field(default_factory=list)
    signed_in: bool = False
    """The request carried the shop's bearer token."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """(role, text) of the messages before this one, when the client hands the conversation over in the
    message (a data part `{"history": [...]}`) instead of continuing a task."""


@dataclass
class Pending:
    """What a task in input-required or auth-required waits for, and what it already has."""

    waiting: Waiting
    photos: list[str] = field(default_factory=list)
    reason: str | None = None


@dataclass
class Reply:
    text: str
    state: State = "completed"
    artifacts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(name, data) pairs: each becomes an artifact holding one data part."""
    pending: Pending | None = None


class Shop:
    """The shop's rules and the one thing it remembers across tasks: the next return number."""

    def __init__(self) -> None:
        self._rma_numbers = itertools.count(5521)

    def answer(self, incoming: Incoming, pending: Pending | None = None) -> Reply:
        if pending is None and incoming.history:
            pending = _pending_after(incoming.history, incoming.signed_in)
        order_id = _order_in(incoming)
        if pending is not None:
            return self._continue(incoming, pending, order_id)
        reason = _reason_in(incoming)
        if incoming.files:
            thanks = _thanks(incoming.files)
            photos = [f.name for f in incoming.files]
            if order_id:
                reply = self._return(order_id, reason, photos)
                return Reply(f"{thanks} {reply.text}", artifacts=reply.artifacts)
            return self._ask_order(f"{thanks} Which order is it for?", "order_for_return", photos, reason)
        if _HISTORY.search(incoming.text):
            return self._history() if incoming.signed_in else _sign_in()
        if reason is not None or _RETURN.search(incoming.text):
            if order_id:
                return self._return(order_id, reason, [])
            return self._ask_order("I can help with a return. Which order is it?", "order_for_return", [], reason)
        if order_id:
            return _status(order_id)
        if _GOODBYE.search(incoming.text):
            return Reply("Thank you for shopping with us. Goodbye!")
        if _STATUS.search(incoming.text):
            return self._ask_order("Sure. What is your order number? It looks like ORD-1234.", "order_for_status")
        return Reply("Hello! I can check an order's status or start a return. How can I help?")

    def _continue(self, incoming: Incoming, pending: Pending, order_id: str | None) -> Reply:
        if pending.waiting == "sign_in":
            return self._history() if incoming.signed_in else _sign_in()
        photos = pending.photos + [f.name for f in incoming.files]
        if order_id is None:
            return self._ask_order("I did not catch an order number. It looks like ORD-1234.", pending.waiting,
                                   photos, pending.reason)
        if pending.waiting == "order_for_status":
            return _status(order_id)
        return self._return(order_id, _reason_in(incoming) or pending.reason, photos)

    def _return(self, order_id: str, reason: str | None, photos: list[str]) -> Reply:
        if order_id not in ORDERS:
            return self._ask_order(f"I could not find {order_id}. Which order is it?", "order_for_return",
                                   photos, reason)
        rma = f"RMA-{next(self._rma_numbers)}"
        because = f" (reason: {reason})" if reason else ""
        attached = f" I attached {', '.join(photos)} to it." if photos else ""
        record: dict[str, Any] = {"rma": rma, "order_id": order_id}
        if reason:
            record["reason"] = reason
        return Reply(f"Return {rma} created for {order_id}{because}. Print the label we emailed you.{attached}",
                     artifacts=[("return", record)])

    @staticmethod
    def _ask_order(question: str, waiting: Waiting, photos: list[str] | None = None,
                   reason: str | None = None) -> Reply:
        return Reply(question, state="input-required",
                     pending=Pending(waiting=waiting, photos=list(photos or []), reason=reason))

    @staticmethod
    def _history() -> Reply:
        listed = "; ".join(f"{o.order_id} {o.item} ({o.status})" for o in ORDERS.values())
        return Reply(f"Your recent orders: {listed}.",
                     artifacts=[("orders", {"orders": [o.as_data() for o in ORDERS.values()]})])


def _status(order_id: str) -> Reply:
    order = ORDERS.get(order_id)
    if order is None:
        return Reply(f"I could not find {order_id}. Please check the number.")
    eta = f", arriving {order.eta}" if order.eta else ""
    return Reply(f"Order {order_id} ({order.item}) is {order.status}{eta}.", artifacts=[("order", order.as_data())])


def _sign_in() -> Reply:
    return Reply("Please sign in to see your order history: send your bearer token.", state="auth-required",
                 pending=Pending(waiting="sign_in"))


def _thanks(files: list[FileIn]) -> str:
    received = ", ".join(f.name + (f" ({f.size} bytes)" if f.size is not None else "") for f in files)
    return f"Thanks, I received {received}."


def _order_in(incoming: Incoming) -> str | None:
    """An order number from a data part (`order` or `order_id`), else from the words."""
    for data in incoming.data:
        for key in ("order", "order_id"):
            value = data.get(key)
            if isinstance(value, str) and _ORDER_ID.fullmatch(value.strip()):
                return value.strip().upper()
    found = _ORDER_ID.search(incoming.text)
    return found.group(0).upper() if found else None


def _reason_in(incoming: Incoming) -> str | None:
    for data in incoming.data:
        reason = data.get("reason")
        if isinstance(reason, str) and reason.strip():
            return reason.strip()
    return None


def _pending_after(history: list[tuple[str, str]], signed_in: bool) -> Pending | None:
    """What the shop would be waiting for after the user's earlier messages: they are answered again by a
    shop of their own (so no return number is used up), and the last question stands."""
    scratch = Shop()
    pending: Pending | None = None
    for role, text in history:
        if role == "user":
            pending = scratch.answer(Incoming(text=text, signed_in=signed_in), pending).pending
    return pending
