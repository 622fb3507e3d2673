"""The page's iframes: the one a selector names (`chat.frame`, a step's `frame`), and what they hold for the models
that look at the page: an aria snapshot or the text of the page's own document holds none of it (`- iframe`), so a
judge asked about an embedded widget or form said it was not there, and the browser agent never saw it. Each iframe
of the page's own document is named with a selector of it, the `frame` the browser agent's actions take to act in
it."""

from __future__ import annotations

from typing import Literal

from playwright.async_api import Frame, Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tamesu.targets.browser._browser import _first_line


class NoFrame(Exception):
    """The selector names no iframe: what is wrong with it (`is not an iframe`), for the caller to say whose."""


async def find_frame(page: Page, selector: str, timeout_ms: float) -> Frame:
    """The document of the one iframe `selector` names (from any origin), waited for up to `timeout_ms`."""
    frames = page.locator(selector)
    try:
        await frames.first.wait_for(state="attached", timeout=timeout_ms)
    except PlaywrightTimeout:
        raise NoFrame(f"is not in the page within {timeout_ms / 1000:g}s") from None
    if (count := await frames.count()) > 1:
        raise NoFrame(f"matches {count} elements")
    handle = await frames.element_handle(timeout=timeout_ms)
    frame = await handle.content_frame()
    if frame is None:
        raise NoFrame("is not an iframe")
    return frame


async def iframe_hint(page: Page, advice: str) -> str:
    """` (the page has 2 iframes: ADVICE)` when the page has any, else "": what a selector that found nothing
    may have missed."""
    count = await page.locator("iframe").count()
    return f" (the page has {count} iframe{'s' if count > 1 else ''}: {advice})" if count else ""


_NAMED = """(element) => {
  const quoted = (value) => '"' + value.replace(/\\\\/g, "\\\\\\\\").replace(/"/g, '\\\\"') + '"';
  const alone = (selector) => {
    try { const found = document.querySelectorAll(selector); return found.length === 1 && found[0] === element; }
    catch { return false; }
  };
  const tried = element.id ? ["#" + CSS.escape(element.id)] : [];
  for (const key of ["title", "name", "src"]) {
    const value = element.getAttribute(key);
    if (value) tried.push("iframe[" + key + "=" + quoted(value) + "]");
  }
  const found = tried.find(alone);
  if (found) return found;
  const index = [...document.querySelectorAll("iframe")].indexOf(element);
  return index < 0 ? null : "iframe >> nth=" + index;
}"""
"""A selector that names this one iframe element of the page's document: its id, title, name or src when one of
them is the page's only such, else its place among the page's iframes."""


async def frame_selector(page: Page, frame: Frame, timeout_ms: float) -> str | None:
    """The selector an action's `frame` names `frame` with, checked the way `find_frame` will look for it; None for
    an iframe inside another iframe or a shadow root, which `frame` cannot name."""
    if frame.parent_frame != page.main_frame:
        return None
    try:
        element = await frame.frame_element()
        selector = await element.evaluate(_NAMED)
        if not isinstance(selector, str):
            return None
        named = page.locator(selector)
        if await named.count() != 1 or not await named.evaluate("(found, element) => found === element", element,
                                                                 timeout=timeout_ms):
            return None
    except Exception:  # a frame that goes away while it is named is not there to act in
        if page.is_closed():
            raise
        return None
    return selector


async def inside_frames(page: Page, what: Literal["aria", "text"], timeout_ms: float) -> str:
    """Each iframe's aria snapshot or text (nested ones too), under a line naming it, with the `frame` that reaches
    it for the aria snapshot the browser agent sees; "" when there is none."""
    parts = []
    for frame in page.frames:
        if frame == page.main_frame or frame.is_detached():
            continue
        body = frame.locator("body")
        try:
            content = await (body.aria_snapshot(timeout=timeout_ms) if what == "aria" else
                             body.inner_text(timeout=timeout_ms))
        except Exception as exc:  # a frame that navigates or goes away while it is read
            if page.is_closed():
                raise
            content = f"(it could not be read: {_first_line(exc)})"
        if content.strip():
            parts.append(f"inside the iframe {frame.url}{await _reached(page, frame, what, timeout_ms)}:\n{content}")
    return "\n".join(parts)


async def _reached(page: Page, frame: Frame, what: str, timeout_ms: float) -> str:
    """How an action reaches into the iframe, for the browser agent (these words are part of what its model sees,
    so a change of them is a change of the cache keys of goals on pages with iframes)."""
    if what != "aria":
        return ""
    selector = await frame_selector(page, frame, timeout_ms)
    return f" (act in it with frame: {selector})" if selector else " (actions do not reach into it)"
