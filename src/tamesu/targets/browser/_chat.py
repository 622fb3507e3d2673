"""A web chat widget as a conversational target: one user turn typed into the widget, the agent's new
messages read back once the widget says the agent has finished."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tamesu.conversation import AgentTurn, TurnError, UserTurn
from tamesu.targets.browser._actions import PageEnv, locate
from tamesu.targets.browser._browser import _first_line
from tamesu.targets.browser.spec import ChatSpec, selector_text

_POLL = 0.05


async def chat_turn(env: PageEnv, chat: ChatSpec, turn: UserTurn, timeout: float) -> AgentTurn:
    page, session = env.page, env.session
    messages = locate(page, chat.messages)
    before = await messages.count()
    field = locate(page, chat.input)
    try:
        await field.fill(turn.display(), timeout=env.spec.step_timeout * 1000)
    except PlaywrightTimeout:
        raise TurnError(f"the chat input {selector_text(chat.input)} is not there to type in") from None
    sent_at = session.now_ms()
    try:
        if chat.send is not None:
            await locate(page, chat.send).click(timeout=env.spec.step_timeout * 1000)
        else:
            await field.press("Enter", timeout=env.spec.step_timeout * 1000)
    except PlaywrightTimeout:
        raise TurnError(f"the chat send control {selector_text(chat.send)} could not be clicked") from None
    session.event("chat_sent", chars=len(turn.display()))
    deadline = asyncio.get_running_loop().time() + timeout
    first_at: float | None = None
    while await messages.count() <= before:
        if asyncio.get_running_loop().time() > deadline:
            raise TurnError(f"the agent wrote no message in the widget within {timeout:g}s "
                            f"({selector_text(chat.messages)} still matches {before})")
        await asyncio.sleep(_POLL)
    first_at = session.now_ms()
    remaining = max(0.1, deadline - asyncio.get_running_loop().time())
    try:
        if chat.done.hidden is not None:
            await locate(page, chat.done.hidden).first.wait_for(state="hidden", timeout=remaining * 1000)
        if chat.done.visible is not None:
            await locate(page, chat.done.visible).first.wait_for(state="visible", timeout=remaining * 1000)
    except PlaywrightTimeout:
        raise TurnError(f"the agent's answer never finished within {timeout:g}s (done: "
                        f"{selector_text(chat.done.hidden or chat.done.visible)})") from None
    texts, completed = await _quiet(messages, before, chat.done.quiet, deadline, session.now_ms)
    text = "\n".join(texts)
    return AgentTurn(text=text, response={"messages": texts, "url": page.url}, raw=[{"messages": texts}],
                     sent_at_ms=sent_at, first_token_at_ms=first_at, completed_at_ms=completed)


async def _quiet(messages: object, before: int, quiet: float, deadline: float,
                 now_ms: Callable[[], float]) -> tuple[list[str], float]:
    """The new messages once they stopped changing for `quiet` seconds (streamed answers grow word by word),
    and when they last changed: the agent's turn ended then, not when the quiet period did."""
    loop = asyncio.get_running_loop()
    last: list[str] | None = None
    stable_since = loop.time()
    changed_at = now_ms()
    while True:
        try:
            texts = [" ".join(t.split()) for t in (await messages.all_inner_texts())[before:]]  # type: ignore[attr-defined]
        except PlaywrightError as exc:
            raise TurnError(f"the widget's messages could not be read: {_first_line(exc)}") from None
        now = loop.time()
        if texts != last:
            last, stable_since, changed_at = texts, now, now_ms()
        elif now - stable_since >= quiet or now > deadline:
            return texts, changed_at
        await asyncio.sleep(_POLL)
