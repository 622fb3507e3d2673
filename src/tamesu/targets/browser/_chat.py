"""A web chat widget as a conversational target: one user turn typed into the widget, the agent's new
messages read back once the widget says the agent has finished."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, Locator, Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tamesu.conversation import AgentTurn, Session, TurnError, UserTurn
from tamesu.matching import one_line
from tamesu.net.urls import userinfo_hidden
from tamesu.targets.browser._actions import PageEnv, at, locate
from tamesu.targets.browser._browser import _first_line
from tamesu.targets.browser._frames import NoFrame, find_frame, iframe_hint
from tamesu.targets.browser._watch import failed_meanwhile
from tamesu.targets.browser.spec import ChatSpec, Selector, selector_text

_POLL = 0.05
_GLANCE_MS = 1000
"""How long what tamesu does to a widget before its first turn waits for what is not there yet: the chat input the
greeting turn focuses (a widget whose input comes with its greeting has none yet), the iframe whose messages are
counted once the widget opened."""

_DEEP = """const deepAll = (selector) => {
  const found = [...document.querySelectorAll(selector)];
  if (found.length) return found;
  const walk = (root) => {
    for (const element of root.querySelectorAll("*")) {
      if (!element.shadowRoot) continue;
      found.push(...element.shadowRoot.querySelectorAll(selector));
      walk(element.shadowRoot);
    }
  };
  walk(document);
  return found;
};"""
"""The elements a CSS selector matches in the page, inside open shadow roots too (a widget in a custom element,
as Playwright's own locators find them), looked for there only when the page itself has none: a widget in the
light DOM pays nothing for it."""

_SAID = """const said = (element) => (element.innerText || "").trim() !== ""
  || element.querySelector("img, svg, video, audio, canvas, picture") !== null;"""
"""A message with something in it: the empty bubble a widget adds before it writes the answer into it is no
answer yet (read then, the answer was "", and its first token timed at the empty bubble)."""

_MORE_THAN = "([selector, count]) => { " + _DEEP + _SAID + """
  const found = deepAll(selector);
  return found.length > count && found.slice(count).some(said);
}"""
_NEW_SAID = "(elements, count) => { " + _SAID + " return elements.length > count && elements.slice(count).some(said); }"
_COUNT = "(selector) => { " + _DEEP + " return deepAll(selector).length; }"
_SETTLE = """async ([selector, from, quiet, every, budget]) => {
""" + _DEEP + """
  const read = () => deepAll(selector).slice(from).map((e) => e.innerText);
  const start = performance.now();
  let last = JSON.stringify(read()), since = start;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, every));
    const now = JSON.stringify(read()), at = performance.now();
    if (now !== last) { last = now; since = at; }
    else if (at - since >= quiet) return {texts: JSON.parse(now), quiet_ms: at - since, settled: true};
    if (at - start >= budget) return {texts: JSON.parse(now), quiet_ms: at - since, settled: false};
  }
}"""
"""The new messages once unchanged for `quiet` ms, and how long ago they last changed (the turn ended then); or,
still changing after `budget` ms, as they stand then (the page's loop ends with the wait, not with the page)."""

_MARK_SHOWN = """(elements) => {
  const shown = (e) => e.isConnected && e.getClientRects().length > 0 && e.checkVisibility({visibilityProperty: true});
  const previous = window.__tamesuDone;
  if (previous && previous.observer) previous.observer.disconnect();
  const state = {marked: elements.filter(shown), hidden: false, observer: null};
  if (state.marked.length) {
    state.observer = new MutationObserver(() => {
      if (state.marked.some((e) => !shown(e))) { state.hidden = true; state.observer.disconnect(); }
    });
    state.observer.observe(document.documentElement, {attributes: true, childList: true, subtree: true});
  }
  window.__tamesuDone = state;
  return state.marked.length;
}"""
"""Marks the `done.visible` elements shown before a turn is sent and watches, inside the page, for one of them to
be hidden or removed: a widget that hides its "answered" sign while it works and shows it again may do both
between two polls of ours."""
_ONE_WAS_HIDDEN = "() => Boolean(window.__tamesuDone && window.__tamesuDone.hidden)"

_WATCH_BUSY = """(selector) => {
""" + _DEEP + """
  const previous = window.__tamesuBusy;
  if (previous && previous.observer) previous.observer.disconnect();
  const state = {seen: deepAll(selector).length > 0, observer: null};
  if (!state.seen) {
    state.observer = new MutationObserver(() => {
      if (deepAll(selector).length > 0) { state.seen = true; state.observer.disconnect(); }
    });
    state.observer.observe(document.documentElement, {childList: true, subtree: true});
  }
  window.__tamesuBusy = state;
}"""
"""Watches, inside the page, whether the `done.hidden` selector matches any element during the turn: a widget
that adds its typing indicator for a moment and removes it is seen, a selector with a typo never is."""
_BUSY_SEEN = "() => Boolean(window.__tamesuBusy && window.__tamesuBusy.seen)"


async def widget(env: PageEnv, chat: ChatSpec) -> Page | Frame:
    """Where the widget's elements are: the page, or the document of the iframe `chat.frame` names (most vendors'
    widgets live in one, often from another origin), found anew each turn since a widget may load it late."""
    if chat.frame is None:
        return env.page
    try:
        return await find_frame(env.page, chat.frame, env.spec.step_timeout * 1000)
    except NoFrame as exc:
        raise TurnError(f"the chat frame {chat.frame!r} {exc} (chat.frame: the widget's iframe)") from None


async def one(action: Awaitable[None], locator: Locator, what: str, selector: Selector) -> None:
    """`action` on the element `locator` names; a selector that matches several fails the turn in one line (it was
    Playwright's "strict mode violation" message, cut at its list of elements, or an internal error)."""
    try:
        await action
    except PlaywrightTimeout:
        raise
    except PlaywrightError:
        if (count := await locator.count()) > 1:
            raise TurnError(f"{what} {selector_text(selector)} matches {count} elements; make it match one") from None
        raise


async def _count(page: Page | Frame, selector: Selector) -> int:
    """How many messages the widget shows, counted as the waits below count (Playwright's locators also pierce
    shadow roots, and would count both)."""
    return int(await page.evaluate(_COUNT, selector)) if isinstance(selector, str) else \
        await locate(page, selector).count()


async def greeting_turn(env: PageEnv, chat: ChatSpec, timeout: float) -> AgentTurn:
    """`chat.greeting`: the widget writes first, once it is open. Every message it shows is the greeting (one
    already there when the page loaded too), waited for until something is written and its messages are quiet."""
    session = env.session
    started = session.now_ms()
    deadline = asyncio.get_running_loop().time() + timeout
    root = await widget(env, chat)
    with contextlib.suppress(PlaywrightError):  # a widget may greet once its input has the focus, as a user's click
        await locate(root, chat.input).first.focus(timeout=_GLANCE_MS)  # gives it; one without an input still greets
    await _more_than(env, root, chat, 0, deadline, timeout, len(session.events), what="greeting")
    first_at = session.now_ms()
    texts, completed = await _answer(env, root, chat, 0, deadline, timeout)
    env.chat_read, env.chat_answers = len(texts), 1
    return AgentTurn(text="\n".join(texts), response={"messages": texts, "url": userinfo_hidden(env.page.url)},
                     raw=[{"messages": texts}], sent_at_ms=started, first_token_at_ms=first_at,
                     completed_at_ms=completed)


async def _say_unread(env: PageEnv, texts: list[str], cut_s: float | None = None) -> None:
    """Messages the widget wrote after the last turn was read belong to no turn: said, with what usually causes
    them, since the answers that follow are then each read one turn late or not at all. `cut_s`: the last of them
    was still being written when the look after the last turn ended, that many seconds after it began."""
    if not texts:
        return
    hint = f"the widget wrote {len(texts)} message{'s' if len(texts) != 1 else ''} after turn {env.chat_answers} " \
           "was read, so no turn has them: a greeting it writes once it opens (set chat.greeting: true), or an " \
           "answer that pauses longer than done.quiet (set done.hidden or done.visible)"
    cut: dict[str, object] = {}
    if cut_s is not None:
        cut = {"cut": True, "limit_s": cut_s}
        hint += f"; the last was still being written when the look after the last turn ended, turn_timeout " \
                f"({cut_s:g}s) after it began: it is cut there, as the widget showed it then"
    env.session.event("chat_unread", after_turn=env.chat_answers, messages=[one_line(t, 300) for t in texts], hint=hint,
                      **cut)


_SPARE_MS = 1000.0
"""The least the last look waits past the slowest answer's time: a loaded machine's lag on a quick widget."""


async def last_look(env: PageEnv, chat: ChatSpec, limit: float) -> None:
    """After the last turn, the widget watched for one more message: a widget that writes a greeting late and takes
    the next words while it answers has each answer read one turn late, and only its last answer, which comes after
    the last turn was read, shows it (a `chat_unread` after the last turn). Watched until as long after the last turn
    was sent as the slowest answer took from the sending of the turn before (each answer's time, were they a turn
    late), half that again (at least a second: an agent's last answer may be slower than its others, a loaded
    machine later than both), and `done.quiet`; past that while a call the page made since the last words were sent
    is still out, until it ends, and `done.quiet` and a second more. A new message ends the watch at once and is
    read until quiet; the look, that reading included, takes at most `limit` seconds (as a turn's waits share its
    turn_timeout): a message still being written then is said as it stands, cut."""
    if env.chat_read is None or env.chat_sent_ms is None:
        return
    loop = asyncio.get_running_loop()
    began = loop.time()
    until = env.chat_sent_ms + env.chat_answer_ms + max(env.chat_answer_ms / 2, _SPARE_MS)
    wait = min(limit, max(0.0, (until - env.session.now_ms()) / 1000) + chat.done.quiet)
    root = await widget(env, chat)
    if not await _new_message(env, root, chat, began + wait):
        # a call the page made since the last words were sent, still out, may be fetching the answer they are owed
        # (a greeting read as the answer, the answer slower than the greeting): waited for, then the message
        since = env.chat_pressed_ms if env.chat_pressed_ms is not None else env.chat_sent_ms
        out = env.calls.out_since(since) if env.calls is not None else []
        if not out or env.calls is None or not await env.calls.ended(out, began + limit):
            return
        more = min(began + limit, loop.time() + _SPARE_MS / 1000 + chat.done.quiet)
        if not await _new_message(env, root, chat, more):
            return  # nothing more: each answer was its turn's
    read = await _read(env, root, chat, env.chat_read, began + limit)
    await _say_unread(env, read.texts, None if read.settled else limit)


async def _new_message(env: PageEnv, root: Page | Frame, chat: ChatSpec, deadline: float) -> bool:
    """Whether the widget shows more than it did when its last answer was read, by `deadline` (the loop's time)."""
    assert env.chat_read is not None
    wait = max(0.0, deadline - asyncio.get_running_loop().time())
    try:
        await _more_than(env, root, chat, env.chat_read, deadline, wait, len(env.session.events))
    except TurnError:
        return False
    return True


async def opened(env: PageEnv, chat: ChatSpec) -> None:
    """Without `chat.greeting`: how many messages the widget shows once open, so that one it writes before the
    first words are sent (a greeting a moment after it opens, or once its input has the focus) is said, not
    silently left to no turn."""
    try:
        # a widget's iframe not there yet is not waited for: the first turn waits, and says it when it never comes
        root = env.page if chat.frame is None else await find_frame(env.page, chat.frame, _GLANCE_MS)
        env.chat_opened = await _count(root, chat.messages)
    except (NoFrame, PlaywrightError):
        env.chat_opened = None


async def _say_greeting_unread(env: PageEnv, root: Page | Frame, chat: ChatSpec, before: int) -> None:
    """The messages the widget wrote after it opened and before the first words were sent: a greeting no turn reads."""
    opened_with, env.chat_opened = env.chat_opened, None
    if opened_with is None or before <= opened_with:
        return
    texts = (await _texts(root, chat.messages))[opened_with:before]
    env.session.event(
        "chat_unread", after_turn=0, messages=[one_line(t, 300) for t in texts],
        hint=f"the widget wrote {len(texts)} message{'s' if len(texts) != 1 else ''} after it opened and before the "
             "first words were sent, so no turn has them: a greeting (set chat.greeting: true to have it as the "
             "agent's turn 1)")


async def _texts(page: Page | Frame, selector: Selector) -> list[str]:
    if isinstance(selector, str):
        raw = await page.evaluate("(selector) => { " + _DEEP + " return deepAll(selector).map((e) => e.innerText); }",
                                  selector)
    else:
        raw = await locate(page, selector).all_inner_texts()
    return [" ".join(str(t).split()) for t in raw]


async def chat_turn(env: PageEnv, chat: ChatSpec, turn: UserTurn, timeout: float) -> AgentTurn:
    session = env.session
    events_before = len(session.events)
    page = await widget(env, chat)
    field = locate(page, chat.input)
    try:
        await one(field.fill(turn.display(), timeout=env.spec.step_timeout * 1000), field, "the chat input",
                  chat.input)
    except PlaywrightTimeout:
        hint = await iframe_hint(env.page, "a widget in one needs chat.frame") if chat.frame is None else ""
        raise TurnError(f"the chat input {selector_text(chat.input)} is not there to type in{hint}{at(env.page)}"
                        ) from None
    # counted once the words are typed: a widget that keeps its input disabled while it answers lets them in only
    # after the last answer, which is then not this turn's
    before = await _count(page, chat.messages)
    await _say_greeting_unread(env, page, chat, before)
    if env.chat_read is not None and before > env.chat_read:
        await _say_unread(env, (await _texts(page, chat.messages))[env.chat_read:before])
    shown_before = 0
    if chat.done.visible is not None:
        shown_before = await _mark_shown(page, chat.done.visible)
    if isinstance(chat.done.hidden, str):
        await page.evaluate(_WATCH_BUSY, chat.done.hidden)
    sent_at = session.now_ms()
    try:
        if chat.send is not None:
            send = locate(page, chat.send)
            await one(send.click(timeout=env.spec.step_timeout * 1000), send, "the chat send control", chat.send)
        else:
            await field.press("Enter", timeout=env.spec.step_timeout * 1000)
    except PlaywrightTimeout:
        raise TurnError(f"the chat send control {selector_text(chat.send)} could not be clicked") from None
    session.event("chat_sent", chars=len(turn.display()))
    # the widget has the words by now: the click's own wait (long on a loaded machine) is not the answer's time
    handed_at = session.now_ms()
    deadline = asyncio.get_running_loop().time() + timeout
    await _more_than(env, page, chat, before, deadline, timeout, events_before)
    shown_at = session.now_ms()
    first_at: float | None = shown_at
    remaining = max(0.1, deadline - asyncio.get_running_loop().time())
    try:
        if chat.done.hidden is not None:
            await locate(page, chat.done.hidden).first.wait_for(state="hidden", timeout=remaining * 1000)
    except PlaywrightTimeout:
        raise TurnError(f"the agent's answer never finished within {timeout:g}s (done: "
                        f"{selector_text(chat.done.hidden)} still shown)", limit_s=timeout) from None
    if isinstance(chat.done.hidden, str) and not await page.evaluate(_BUSY_SEEN) \
            and not await locate(page, chat.done.hidden).count():
        # (a shadow root's changes are not the document's: an indicator there that is in the page now counts)
        # a misspelt selector is "hidden" at once: the answer would be read at its first pause, the agent blamed
        raise TurnError(f"the widget's busy sign {selector_text(chat.done.hidden)} (done.hidden) matched no "
                        "element while the agent answered: is the selector right?")
    if chat.done.visible is not None:
        await _shown_again(page, chat.done.visible, shown_before, deadline, timeout)
    texts, completed = await _answer(env, page, chat, before, deadline, timeout)
    env.chat_read, env.chat_answers = before + len(texts), env.chat_answers + 1
    env.chat_answer_ms = max(env.chat_answer_ms,
                             shown_at - (env.chat_sent_ms if env.chat_sent_ms is not None else handed_at))
    env.chat_sent_ms, env.chat_pressed_ms = handed_at, sent_at
    if (answer := _without_own_message(session, chat, texts, turn.display())) is not texts:
        texts, first_at = answer, None  # the first new message seen was the user's: the agent's came unseen
    text = "\n".join(texts)
    return AgentTurn(text=text, response={"messages": texts, "url": userinfo_hidden(env.page.url)},
                     raw=[{"messages": texts}], sent_at_ms=sent_at, first_token_at_ms=first_at,
                     completed_at_ms=completed)


class _Read(NamedTuple):
    texts: list[str]
    completed_ms: float
    """When they last changed."""
    settled: bool
    """False: still changing when the wait ended; `texts` are what the widget showed then."""


_ROUND_TRIP = 5.0
"""What a read inside the page may take past its own bound before the page counts as one that stopped answering."""


async def _read(env: PageEnv, page: Page | Frame, chat: ChatSpec, before: int, deadline: float) -> _Read:
    """The messages after the first `before` once quiet for `done.quiet`, or as they stand at `deadline`."""
    session = env.session
    if not isinstance(chat.messages, str):
        return await _quiet(locate(page, chat.messages), before, chat.done.quiet, deadline, session.now_ms)
    remaining = max(0.1, deadline - asyncio.get_running_loop().time())
    try:
        settled = await asyncio.wait_for(page.evaluate(_SETTLE, [chat.messages, before, chat.done.quiet * 1000,
                                                                 int(_POLL * 1000), remaining * 1000]),
                                         remaining + _ROUND_TRIP)
    except TimeoutError:
        raise TurnError(f"the widget's messages could not be read: the page did not answer for "
                        f"{remaining + _ROUND_TRIP:g}s") from None
    return _Read([" ".join(t.split()) for t in settled["texts"]], session.now_ms() - float(settled["quiet_ms"]),
                 bool(settled["settled"]))


async def _answer(env: PageEnv, page: Page | Frame, chat: ChatSpec, before: int, deadline: float, timeout: float
                  ) -> tuple[list[str], float]:
    """A turn's new messages once quiet, and when they last changed; still changing at its deadline, it fails."""
    read = await _read(env, page, chat, before, deadline)
    if not read.settled:
        raise TurnError(f"the agent's messages kept changing for {timeout:g}s", limit_s=timeout)
    return read.texts, read.completed_ms


async def _more_than(env: PageEnv, page: Page | Frame, chat: ChatSpec, before: int, deadline: float,
                     timeout: float, events_before: int, what: str = "message") -> None:
    """Waits for the widget to show more than `before` messages; the turn fails when it does not in time."""
    session = env.session

    async def nothing() -> TurnError:
        now = await _count(page, chat.messages)
        matches = f"still matches {before}" if now <= before else \
            f"matches {now - before} more, with nothing written in {'it' if now - before == 1 else 'them'}"
        return TurnError(f"the agent wrote no {what} in the widget within {timeout:g}s "
                         f"({selector_text(chat.messages)} {matches})"
                         f"{failed_meanwhile(session.events, events_before)}", limit_s=timeout)

    if isinstance(chat.messages, str):
        # one wait inside the page, not a round trip per poll: ten widgets at once keep Chromium's CPU for pages
        remaining = max(0.1, deadline - asyncio.get_running_loop().time())
        try:
            await page.wait_for_function(_MORE_THAN, arg=[chat.messages, before], polling=int(_POLL * 1000),
                                         timeout=remaining * 1000)
        except PlaywrightTimeout:
            raise await nothing() from None
        return
    messages = locate(page, chat.messages)
    while not await messages.evaluate_all(_NEW_SAID, before):
        if asyncio.get_running_loop().time() > deadline:
            raise await nothing()
        await asyncio.sleep(_POLL)


def _without_own_message(session: Session, chat: ChatSpec, texts: list[str], said: str) -> list[str]:
    """The new messages without the user's own, when the `messages` selector matches it too (`.msg` for both
    sides): first among them, with the agent's after it. One message alone that reads as the user's words may be
    an agent that echoes them: kept, and said, since an answer slower than `done.quiet` would be read so too."""
    if not texts or texts[0].casefold() != " ".join(said.split()).casefold():
        return texts
    hint = "narrow the selector to the agent's messages"
    if len(texts) > 1:
        session.event("chat_own_message", selector=selector_text(chat.messages), dropped=texts[0],
                      hint=f"the messages selector matches the user's own message too: {hint}")
        return texts[1:]
    session.event("chat_own_message", selector=selector_text(chat.messages), dropped=None,
                  hint="the only new message reads as the user's own words: if the messages selector matches the "
                       f"user's message too, {hint} (the answer was read before the agent wrote)")
    return texts


async def _mark_shown(page: Page | Frame, selector: Selector) -> int:
    """How many `done.visible` elements are shown before the turn is sent (a sign left from the last answer)."""
    try:
        return int(await locate(page, selector).evaluate_all(_MARK_SHOWN))
    except PlaywrightError as exc:
        raise TurnError(f"the widget's done sign {selector_text(selector)} could not be read: "
                        f"{_first_line(exc)}") from None


async def _shown_again(page: Page | Frame, selector: Selector, shown_before: int, deadline: float,
                       timeout: float) -> None:
    """Waits for this answer's `done.visible` sign: more of them shown than before the turn was sent (a new one
    under each answer), or one shown after one of those was hidden (one sign hidden while the agent works). A
    sign already shown from the last answer is not this one's."""
    loop = asyncio.get_running_loop()
    shown = locate(page, selector).filter(visible=True)
    while True:
        try:
            count = await shown.count()
            if count > shown_before or (count and await page.evaluate(_ONE_WAS_HIDDEN)):
                return
        except PlaywrightError as exc:
            raise TurnError(f"the widget's done sign {selector_text(selector)} could not be read: "
                            f"{_first_line(exc)}") from None
        if loop.time() > deadline:
            raise TurnError(f"the agent's answer never finished within {timeout:g}s (done: "
                            f"{selector_text(selector)} was not shown for this answer; {shown_before} shown "
                            "before it was sent stayed shown)" if shown_before else
                            f"the agent's answer never finished within {timeout:g}s (done: "
                            f"{selector_text(selector)} never shown)", limit_s=timeout)
        await asyncio.sleep(_POLL)


async def _quiet(messages: object, before: int, quiet: float, deadline: float,
                 now_ms: Callable[[], float]) -> _Read:
    """The new messages once they stopped changing for `quiet` seconds (streamed answers grow word by word),
    and when they last changed: the agent's turn ended then, not when the quiet period did. Past `deadline`,
    as they stand, unsettled (a widget that writes more at each poll was read on and on)."""
    loop = asyncio.get_running_loop()
    last: list[str] | None = None
    stable_since = loop.time()
    changed_at = now_ms()
    while True:
        try:
            texts = [" ".join(t.split()) for t in (await messages.all_inner_texts())[before:]]  # type: ignore[attr-defined]  # a playwright Locator, kept untyped here
        except PlaywrightError as exc:
            raise TurnError(f"the widget's messages could not be read: {_first_line(exc)}") from None
        now = loop.time()
        if texts != last:
            last, stable_since, changed_at = texts, now, now_ms()
        elif now - stable_since >= quiet:
            return _Read(texts, changed_at, True)
        if now > deadline:
            return _Read(texts, changed_at, False)
        await asyncio.sleep(_POLL)
