"""The deterministic actions on a page, shared by `action` steps and by the browser agent's tool calls.

Each returns what it found (recorded with the step) or raises StepFailed with one line saying what did not
hold; a page that cannot be reached at all is an InfraError.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from playwright.async_api import BrowserContext, Frame, Locator, Page, Request, Route
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.matching import one_line, quoted
from tamesu.net.urls import origin_of, userinfo_hidden, userinfo_of
from tamesu.targets.browser._browser import _first_line
from tamesu.targets.browser._calls import Calls
from tamesu.targets.browser._frames import NoFrame, find_frame, iframe_hint
from tamesu.targets.browser.spec import ActionStep, BrowserSpec, RoleSelector, Selector, selector_text


class StepFailed(Exception):
    """The step did not hold (nothing matched, a text is missing, a rule is violated): the run fails."""

    def __init__(self, message: str, detail: Mapping[str, object] | None = None) -> None:
        super().__init__(message)
        self.detail = detail or {}


@dataclass
class PageEnv:
    """What an action works on: the run's page and context, the target's keys, where files go."""

    page: Page
    context: BrowserContext
    spec: BrowserSpec
    session: Session
    name: str
    update_golden: bool = False
    mocks: list[dict[str, object]] = field(default_factory=list)
    chat_read: int | None = None
    """How many messages the chat widget showed when its last answer was read (None before the first)."""
    chat_answers: int = 0
    """How many of the widget's answers were read (its greeting too)."""
    chat_sent_ms: float | None = None
    """When the widget had the last turn's words (its send control clicked; None before the first)."""
    chat_pressed_ms: float | None = None
    """When the last turn's send control was clicked (or Enter pressed): its calls are sent from then on."""
    calls: Calls | None = None
    """The page's script calls still out, for a look that must know whether an answer is still on its way."""
    chat_opened: int | None = None
    """How many messages the chat widget showed once it was opened (None: not counted, or read since)."""
    chat_answer_ms: float = 0.0
    """The longest an answer took to show from when the widget had the turn before's words (the first turn's own,
    for the first): a widget whose late greeting was read as turn 1's answer shows each answer about that long
    after the turn it answers, one turn late."""
    userinfo: dict[str, str] = field(default_factory=dict)
    """The `user:password` the suite wrote in a url it opened (the target's, a navigate step's), by origin: put
    back into a url the browser agent names on that origin (`userinfo_restored`), as it never sees it."""


def host_allowed(url: str, allowed: list[str]) -> bool:
    """Whether `url` may be reached: no list allows all; `about:`, `data:` and `blob:` pages are local."""
    parts = urlsplit(url)
    if not allowed or parts.scheme in ("about", "data", "blob", "chrome-error"):
        return True
    host = (parts.hostname or "").lower()
    for domain in allowed:
        domain = domain.lower()
        if domain.startswith("*."):
            if host == domain[2:] or host.endswith(domain[1:]):
                return True
        elif host == domain:
            return True
    return False


def at(page: Page) -> str:
    """Where the page is, for a failure that found nothing: a login page the site sent the browser to (a storage
    state that expired) is then seen at once."""
    return f" (the page is at {userinfo_hidden(page.url)})"


def locate(page: Page | Frame, selector: Selector) -> Locator:
    if isinstance(selector, RoleSelector):
        return page.get_by_role(selector.role, name=selector.name, exact=selector.exact)  # type: ignore[arg-type]  # an ARIA role the schema checked
    return page.locator(selector)


def _timeout(env: PageEnv, step: ActionStep) -> float:
    return (step.timeout if step.timeout is not None else env.spec.step_timeout) * 1000


async def document(env: PageEnv, step: ActionStep, verb: str) -> Page | Frame:
    """Where the step looks: the page, or the document of the iframe its `frame` names."""
    if step.frame is None:
        return env.page
    try:
        return await find_frame(env.page, step.frame, _timeout(env, step))
    except NoFrame as exc:
        raise StepFailed(f"{verb}: the frame {step.frame!r} {exc}{at(env.page)}") from None


async def _missed(env: PageEnv, step: ActionStep) -> str:
    """Why a step may have found nothing, and where the page is: an element in an iframe needs `frame`."""
    hint = await iframe_hint(env.page, "an element in one needs the step's frame") if step.frame is None else \
        f" (in the frame {step.frame!r})"
    return f"{hint}{at(env.page)}"


async def one_element(env: PageEnv, step: ActionStep, verb: str) -> Locator:
    """The one element the selector names, waited for; a selector matching nothing or several fails."""
    assert step.selector is not None
    locator = locate(await document(env, step, verb), step.selector)
    what = selector_text(step.selector)
    try:
        await locator.first.wait_for(state="attached", timeout=_timeout(env, step))
    except PlaywrightTimeout:
        raise StepFailed(f"{verb}: nothing matches {what} within {_timeout(env, step) / 1000:g}s"
                         f"{await _missed(env, step)}") from None
    count = await locator.count()
    if count > 1:
        raise StepFailed(f"{verb}: {what} matches {count} elements; make it match one")
    return locator


async def run_action(env: PageEnv, step: ActionStep, number: int, *, written: bool = True) -> dict[str, Any]:
    """Do one action; returns `{result?, detail}` for the step's record. `written`: the suite's step, not the
    browser agent's (whose url's credentials are not the suite's)."""
    page = env.page
    timeout = _timeout(env, step)
    try:
        match step.action:
            case "navigate":
                assert step.url is not None
                await navigate(env, step.url, timeout=max(timeout, env.spec.load_timeout * 1000), written=written)
                return {"detail": f"at {userinfo_hidden(page.url)}"}
            case "click":
                locator = await one_element(env, step, "click")
                await _act(locator.click(timeout=timeout), "click", step)
                return {"detail": f"clicked {selector_text(step.selector)}"}
            case "fill":
                locator = await one_element(env, step, "fill")
                await _act(locator.fill(step.value or "", timeout=timeout), "fill", step)
                return {"detail": f"filled {selector_text(step.selector)}"}
            case "press":
                assert step.key is not None
                if step.selector is None:
                    await page.keyboard.press(step.key)
                else:
                    locator = await one_element(env, step, "press")
                    await _act(locator.press(step.key, timeout=timeout), "press", step)
                return {"detail": f"pressed {step.key}"}
            case "wait":
                return await _wait(env, step, timeout)
            case "screenshot":
                path = env.session.artifacts_dir / "screenshots" / f"{step.name or f'step-{number:02d}'}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                if step.selector is not None:
                    await (await one_element(env, step, "screenshot")).screenshot(path=str(path), timeout=timeout)
                else:
                    await page.screenshot(path=str(path), full_page=step.full_page, timeout=timeout)
                return {"detail": f"saved {path.name}", "file": str(path.relative_to(env.session.artifacts_dir))}
            case "eval_js":
                assert step.script is not None
                where = await document(env, step, "eval_js")
                try:
                    # evaluate has no timeout of its own: a promise that never settles must not hang the run
                    value = await asyncio.wait_for(where.evaluate(step.script), timeout / 1000)
                except TimeoutError:
                    raise StepFailed(f"eval_js: the script did not finish within {timeout / 1000:g}s") from None
                except PlaywrightError as exc:
                    raise StepFailed(f"eval_js: the script threw: {_first_line(exc)}") from None
                return {"result": value, "detail": _shown(json.dumps(value, ensure_ascii=False, default=str))}
            case "assert_url":
                return await _assert_url(env, step, timeout)
            case "assert_text":
                return await _assert_text(env, step, timeout)
            case "mock":
                return await _mock(env, step)
            case "a11y":
                from tamesu.targets.browser._a11y import check_a11y

                return await check_a11y(env, step, timeout)
            case "visual":
                from tamesu.targets.browser._visual import compare

                return await compare(env, step, timeout)
    except PlaywrightTimeout as exc:
        raise StepFailed(f"{step.action}: timed out after {timeout / 1000:g}s: {_first_line(exc)}") from None
    raise AssertionError(f"unhandled action {step.action}")


def _shown(text: str, limit: int = 500) -> str:
    """A value as the transcript shows it: a long one cut, saying so and where the whole value is."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (cut: {limit} of {len(text)} characters shown; the whole value is $.result)"


async def _act(awaitable: Any, verb: str, step: ActionStep) -> None:
    try:
        await awaitable
    except PlaywrightTimeout as exc:
        raise StepFailed(f"{verb}: {selector_text(step.selector)} was there but never became actionable "
                         f"(visible, enabled, stable): {_first_line(exc)}") from None


async def navigate(env: PageEnv, url: str, *, timeout: float, written: bool = True) -> None:
    """Go to `url`; outside allowed_domains fails the step, a page that does not load is an InfraError.
    `written`: a url of the suite's, whose `user:password@` is kept for the browser agent's urls to that origin."""
    shown = userinfo_hidden(url)  # never a user:password@ written in it
    if not host_allowed(url, env.spec.allowed_domains):
        raise StepFailed(f"navigate: {shown} is outside allowed_domains ({', '.join(env.spec.allowed_domains)})")
    if written and (userinfo := userinfo_of(url)) and (origin := origin_of(url)) is not None:
        env.userinfo[origin] = userinfo
        # a credential whether or not the suite declared it a secret: masked in whatever records the step (its
        # line in the transcript, the step's own keys), as a declared secret is
        if password := userinfo.partition(":")[2]:
            env.session.redactor.add(unquote(password))
    pending: dict[Request, None] = {}  # a dict keeps the order they were asked for

    def asked(request: Request) -> None:
        pending[request] = None

    def answered(request: Request) -> None:
        pending.pop(request, None)

    page = env.page
    page.on("request", asked)
    page.on("requestfinished", answered)
    page.on("requestfailed", answered)
    try:
        response = await env.page.goto(url, timeout=timeout, wait_until="load")
        if response is not None and response.status >= 400:
            # the page came, as an error page: said on the run's timeline (a 500 page passed with no trace of it)
            env.session.event("page_status", url=shown, status=response.status)
    except PlaywrightTimeout:
        raise InfraError(f"browser target {env.name}: {shown} did not load within {timeout / 1000:g}s"
                         f"{_waiting_on(list(pending), env.page)}") from None
    except PlaywrightError as exc:
        if env.page.is_closed():
            raise
        raise InfraError(f"browser target {env.name}: {shown} did not load: "
                         f"{userinfo_hidden(_first_line(exc))}") from None
    finally:
        page.remove_listener("request", asked)
        page.remove_listener("requestfinished", answered)
        page.remove_listener("requestfailed", answered)


def _waiting_on(pending: list[Request], page: Page) -> str:
    """What a page that never finished loading still waits for: its document, or what the document asked for
    (a picture, a script that never comes keeps the load event from firing though the page is there)."""
    if any(request.is_navigation_request() and request.frame == page.main_frame for request in pending):
        return " (the server sent no page)"
    # a script's own calls (a long poll, a stream) never hold up the load event: naming them would mislead
    pending = [request for request in pending if request.resource_type not in ("fetch", "xhr", "eventsource",
                                                                                "websocket")]
    if not pending:
        return ""
    shown = ", ".join(request.url for request in pending[:3])
    more = f" and {len(pending) - 3} more" if len(pending) > 3 else ""
    return f" (the page came; its load event waits for {len(pending)} request{'s' if len(pending) > 1 else ''}: " \
           f"{shown}{more})"


async def _wait(env: PageEnv, step: ActionStep, timeout: float) -> dict[str, object]:
    page = env.page
    where = await document(env, step, "wait")
    try:
        if step.selector is not None:
            await locate(where, step.selector).first.wait_for(state="visible", timeout=timeout)
            return {"detail": f"{selector_text(step.selector)} is visible"}
        if step.text is not None:
            await where.get_by_text(step.text).first.wait_for(state="visible", timeout=timeout)
            return {"detail": f"{quoted(step.text)} is visible"}
        if step.url is not None:
            await page.wait_for_url(_url_pattern(step.url), timeout=timeout)
            return {"detail": f"at {userinfo_hidden(page.url)}"}
    except PlaywrightTimeout:
        what = selector_text(step.selector) if step.selector is not None else repr(step.text or step.url)
        missed = await _missed(env, step) if step.url is None else at(page)
        raise StepFailed(f"wait: {what} did not appear within {timeout / 1000:g}s{missed}") from None
    await page.wait_for_timeout(step.ms or 0)
    return {"detail": f"waited {step.ms} ms"}


def _url_pattern(url: str) -> Any:
    """An exact URL, or a glob (`*` anything but `/`, `**` anything) when it has a star."""
    if "*" not in url:
        return url
    escaped = re.escape(url).replace(r"\*\*", "\0").replace(r"\*", "[^/]*").replace("\0", ".*")
    return re.compile(f"^{escaped}$")


async def _assert_url(env: PageEnv, step: ActionStep, timeout: float) -> dict[str, Any]:
    assert step.url is not None
    pattern = _url_pattern(step.url)
    try:
        await env.page.wait_for_url(pattern, timeout=timeout, wait_until="commit")
    except PlaywrightTimeout:
        raise StepFailed(f"assert_url: the page is at {userinfo_hidden(env.page.url)}, not {step.url}") from None
    return {"detail": f"at {userinfo_hidden(env.page.url)}"}


async def _assert_text(env: PageEnv, step: ActionStep, timeout: float) -> dict[str, object]:
    assert step.text is not None
    inside = await document(env, step, "assert_text")
    scope = locate(inside, step.selector) if step.selector is not None else inside.locator("body")
    try:
        await scope.filter(has_text=step.text).first.wait_for(state="attached", timeout=timeout)
    except PlaywrightTimeout:
        texts = [one_line(t) for t in await scope.all_inner_texts()]
        where = selector_text(step.selector)
        if not texts:
            raise StepFailed(f"assert_text: nothing matches {where}{await _missed(env, step)}") from None
        seen = "; ".join(one_line(t, 80) for t in texts[:3])
        raise StepFailed(f"assert_text: {quoted(step.text)} is not in {where} within {timeout / 1000:g}s "
                         f"(it says {quoted(seen)})") from None
    return {"detail": f"{quoted(step.text)} is in {selector_text(step.selector)}"}


async def _mock(env: PageEnv, step: ActionStep) -> dict[str, object]:
    """Answer matching requests from now on; routes added later win over the allowed_domains guard."""
    assert step.url is not None
    record: dict[str, Any] = {"url": step.url, "status": step.status, "hits": 0}
    if step.file is not None:
        path = env.session.base_dir / step.file
        if not path.is_file():
            raise StepFailed(f"mock: the file {step.file} does not exist (relative to the suite)")
        body: bytes | str = path.read_bytes()
        content_type = step.content_type
    elif step.json_ is not None:
        body, content_type = json.dumps(step.json_), step.content_type or "application/json"
    else:
        body, content_type = step.body or "", step.content_type or "text/plain"
    method = step.method.upper() if step.method else None

    async def answer(route: Route) -> None:
        if method and route.request.method != method:
            await route.fallback()
            return
        record["hits"] += 1
        env.session.event("browser_mocked", url=route.request.url, status=step.status)
        env.session.count("browser_mocked")
        headers = {"content-type": content_type} if content_type else {}
        await route.fulfill(status=step.status, body=body, headers=headers)

    await env.context.route(_url_pattern(step.url) if "*" not in step.url else step.url, answer)
    env.mocks.append(record)
    return {"detail": f"requests to {step.url} answered with {step.status}"}


def artifact(env: PageEnv, name: str) -> Path:
    path = env.session.artifacts_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
