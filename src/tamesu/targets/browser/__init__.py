"""The `browser` target: a page in Debian's Chromium, driven by Playwright.

A test gives it `steps` (goal, expect, action: see `spec.py`), each sent as one user turn and answered by one
agent turn that records what the step did; or, with a `chat` block, the page's chat widget is the agent and a
script, persona or counterpart talks to it. Every run gets its own browser context in the one browser the
process shares, a screenshot per step, a Playwright trace and a HAR (secrets masked in both).

Traces (telemetry.traceparent): every request the page makes to the agent's own origin (that of `url`) carries a
`traceparent` header: the turn's during a step or chat turn, the conversation's otherwise (the page's load, what
it fetches by itself). Requests to any other origin (third parties) never get one. A turn records its own trace
id when one of its requests carried it, else the conversation's.

Failures: a step that does not hold fails the run (exit 1) naming the step; a page that never loads, a
browser that cannot start or that crashes is an infrastructure error (exit 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from tamesu.conversation import AgentTurn, Session, TurnError, UserTurn
from tamesu.errors import InfraError, Problem
from tamesu.matching import quoted
from tamesu.net.urls import userinfo_hidden
from tamesu.plugins import register
from tamesu.targets.base import StepContext, Target
from tamesu.targets.browser._mask import mask_artifacts
from tamesu.targets.browser.spec import BrowserSpec, ExpectStep, GoalStep, Step, describe, parse_step

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Route

    from tamesu.targets.browser._actions import PageEnv

EXTRA = "browser"
STEP_OPTION = "browser_step"
"""The key of `UserTurn.options` that carries one step of a browser test."""


def missing_extra() -> str | None:
    """One line naming the extra when Playwright is not installed."""
    for package in ("playwright", "numpy", "axe_playwright_python", "PIL"):
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"the browser target needs the {EXTRA} extra ({package} is not installed): " \
                   f"pip install 'tamesu[{EXTRA}]'"
    return None


@register("targets", "browser")
class BrowserTarget(Target[BrowserSpec]):
    kind = "browser"
    metric_names = frozenset({"browser_steps", "goal_steps", "goal_steps_total", "browser_blocked", "browser_mocked"})
    Spec: ClassVar[type[BrowserSpec]] = BrowserSpec
    takes_steps = True

    @classmethod
    def unavailable(cls) -> str | None:
        return missing_extra()

    @classmethod
    def step_problems(cls, steps: list[Any], loc: tuple[Any, ...], spec: Any, context: StepContext
                      ) -> list[Problem]:
        from tamesu.targets.browser.validate import step_problems, storage_state_problem

        problems = []
        state = getattr(spec, "storage_state", None)
        if state and (problem := storage_state_problem(context.suite_dir / state, state)) is not None:
            problems.append(context.problem_at(("targets", context.target_name, "storage_state"), problem))
        return problems + step_problems(steps, loc, spec, context.models, context.problem_at,
                                        context.from_validation, context.has_conversation)

    def __init__(self, spec: BrowserSpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: BrowserSpec = spec
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._env: PageEnv | None = None
        self._crashed: str | None = None
        self._steps = 0
        self._chat_turns = 0
        self._goal_steps: list[int] = []
        self._blocked: list[str] = []
        self._blocked_navigation: str | None = None
        self._turn_traced = False
        """A request of this turn to the agent's origin carried the turn's `traceparent`."""

    # -------------------------------------------------------------- open and close

    async def _open(self, session: Session) -> None:
        missing = missing_extra()
        if missing:
            raise InfraError(missing)
        from tamesu.targets.browser import _browser, _watch
        from tamesu.targets.browser._actions import PageEnv, StepFailed, navigate
        from tamesu.targets.browser._calls import Calls

        try:
            browser = await _browser.acquire(headless=self.spec.headless, cdp_url=self.spec.cdp_url)
        except _browser.BrowserUnavailable as exc:
            raise InfraError(f"{self._what}: the browser could not start: {exc}") from None
        self._browser = browser
        browser.on("disconnected", self._on_disconnected)
        options: dict[str, Any] = {
            "viewport": {"width": self.spec.viewport.width, "height": self.spec.viewport.height},
            "locale": self.spec.locale, "service_workers": "block",
        }
        if self.spec.storage_state:
            state = session.base_dir / self.spec.storage_state
            if not state.is_file():
                raise InfraError(f"{self._what}: storage_state {self.spec.storage_state} does not exist "
                                 "(relative to the suite)")
            options["storage_state"] = str(state)
        session.artifacts_dir.mkdir(parents=True, exist_ok=True)
        if self.spec.trace:
            options["record_har_path"] = str(session.artifacts_dir / "network.har")
        try:
            self._context = context = await browser.new_context(**options)
            # anything without a timeout of its own waits no longer than a step may
            context.set_default_timeout(self.spec.step_timeout * 1000)
            context.set_default_navigation_timeout(self.spec.load_timeout * 1000)
            if self.spec.trace:
                await context.tracing.start(screenshots=self.spec.trace_screenshots, snapshots=True)
            if self.spec.allowed_domains:
                await context.route("**/*", self._guard)
            await self._trace_agent_origin(context, session)
            self._page = page = await context.new_page()
        except Exception as exc:
            raise InfraError(f"{self._what}: the browser could not open a page: {exc}") from None
        page.on("crash", self._on_crash)
        _watch.watch(page, session)
        self._env = PageEnv(page=page, context=context, spec=self.spec, session=session, name=self.name,
                            update_golden=bool(getattr(session, "update_golden", False)),
                            calls=Calls(page, session.now_ms))
        url = session.context.render_url(self.spec.url)
        # named as every target names its url: never a user:password@ written in it
        session.event("browser_open", url=userinfo_hidden(url), engine=self.spec.engine,
                      version=browser.version)
        try:
            await navigate(self._env, url, timeout=self.spec.load_timeout * 1000)
        except StepFailed as exc:
            raise InfraError(f"{self._what}: {exc}") from None

    async def greeting(self) -> AgentTurn | None:
        """The widget's launcher (`chat.open`) clicked, then its greeting read when `chat.greeting` says it writes
        first. Here, not in open(): a launcher that is not there fails the test before its first turn, as a
        missing input or send control fails its turn (in open() it was an internal error, exit 3)."""
        await self._open_widget()
        if self.spec.chat is None or self._env is None:
            return None
        if not self.spec.chat.greeting:
            from tamesu.targets.browser._chat import opened

            await opened(self._env, self.spec.chat)
            return None
        from tamesu.targets.browser._chat import greeting_turn

        return await self._widget_turn("the widget's greeting",
                                       greeting_turn(self._env, self.spec.chat, self.spec.turn_timeout))

    async def _open_widget(self) -> None:
        if self.spec.chat is not None and self.spec.chat.open is not None and self._env is not None:
            from playwright.async_api import Error as PlaywrightError
            from playwright.async_api import TimeoutError as PlaywrightTimeout

            from tamesu.targets.browser._actions import locate
            from tamesu.targets.browser._chat import one
            from tamesu.targets.browser.spec import selector_text

            launcher = locate(self._env.page, self.spec.chat.open)
            try:
                await one(launcher.click(timeout=self.spec.step_timeout * 1000), launcher, "the chat launcher",
                          self.spec.chat.open)
            except PlaywrightTimeout:
                raise TurnError(f"the chat launcher {selector_text(self.spec.chat.open)} could not be clicked "
                                f"within step_timeout ({self.spec.step_timeout:g}s)") from None
            except PlaywrightError as exc:
                await self._raise_if_crashed("the chat launcher's click", exc)
                raise TurnError(f"the chat launcher {selector_text(self.spec.chat.open)} could not be clicked: "
                                f"{str(exc).splitlines()[0]}") from None

    def greets_first(self) -> bool:
        return self.spec.chat is not None and self.spec.chat.greeting

    async def close(self) -> None:
        context, self._context = self._context, None
        browser, self._browser = self._browser, None
        if browser is not None:
            browser.remove_listener("disconnected", self._on_disconnected)
        if context is None:
            return
        session = self._session
        await self._last_look()
        if self.spec.trace and session is not None and not self._crashed:
            try:
                await asyncio.wait_for(context.tracing.stop(path=str(session.artifacts_dir / "trace.zip")), 30)
            except Exception as exc:
                session.event("trace_not_saved", reason=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        with contextlib.suppress(Exception):  # a browser that is gone has nothing to close
            await asyncio.wait_for(context.close(), 30)  # writes the HAR
        if session is not None:
            mask_artifacts(session)

    async def _last_look(self) -> None:
        """A widget read by its quiet alone, with no greeting configured, is watched for one more message after the
        last turn (`_chat.last_look`, bounded by turn_timeout): what it shows is said; a page that fails meanwhile,
        or stops answering past that bound and a few seconds for its round trips, fails nothing and is said too."""
        chat = self.spec.chat
        if chat is None or chat.greeting or chat.done.hidden is not None or chat.done.visible is not None \
                or self._env is None or self._crashed:
            return
        from tamesu.targets.browser._chat import last_look

        spare = 5.0
        try:
            await asyncio.wait_for(last_look(self._env, chat, self.spec.turn_timeout), self.spec.turn_timeout + spare)
        except TimeoutError:
            self._env.session.event("chat_last_look_failed", reason=f"the page did not answer within turn_timeout "
                                    f"({self.spec.turn_timeout:g}s) and {spare:g}s more")
        except Exception as exc:
            self._env.session.event("chat_last_look_failed",
                                    reason=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    async def _trace_agent_origin(self, context: BrowserContext, session: Session) -> None:
        """Stamp requests to the agent's origin with a `traceparent`; routes added later (a step's `mock`)
        still win, and the allowed_domains guard still sees every request."""
        if session.conversation_trace is None:
            return
        origin = _origin(session.context.render_url(self.spec.url))
        if origin is None:
            return

        async def stamp(route: Route) -> None:
            request = route.request
            trace = session.trace or session.conversation_trace
            headers = await request.all_headers()
            if trace is None or any(name.lower() == "traceparent" for name in headers):
                await route.fallback()
                return
            if session.trace is not None:
                self._turn_traced = True
            await route.fallback(headers={**headers, "traceparent": trace.traceparent})

        # only the agent's origin is routed: a third party's requests are never even looked at. (A routed
        # request skips Chromium's HTTP cache, Playwright's rule; each run's context starts with none anyway.)
        await context.route(lambda url: _origin(url) == origin, stamp)
        session.event("conversation_trace", trace_id=session.conversation_trace.trace_id,
                      sent_in=[f"request header traceparent (to {userinfo_hidden(origin)} only)"])

    def turn_trace_id(self, session: Session) -> str | None:
        traced, self._turn_traced = self._turn_traced, False
        if traced and session.trace is not None:
            return session.trace.trace_id
        return session.conversation_trace.trace_id if session.conversation_trace is not None else None

    def _on_disconnected(self, _browser: Any) -> None:
        self._crashed = self._crashed or "the browser exited"

    def _on_crash(self, _page: Any) -> None:
        self._crashed = self._crashed or "the page crashed"

    async def _guard(self, route: Route) -> None:
        """allowed_domains: requests to other hosts are aborted and recorded; a blocked navigation fails the step."""
        from tamesu.targets.browser._actions import host_allowed

        request = route.request
        if host_allowed(request.url, self.spec.allowed_domains):
            await route.fallback()
            return
        self._blocked.append(request.url)
        session = self._require_session()
        session.event("browser_blocked", url=request.url, method=request.method,
                      navigation=request.is_navigation_request())
        session.count("browser_blocked")
        if request.is_navigation_request() and self._page is not None and request.frame == self._page.main_frame:
            self._blocked_navigation = request.url
        await route.abort("blockedbyclient")

    # -------------------------------------------------------------- turns

    async def send(self, turn: UserTurn) -> AgentTurn:
        if self._crashed:
            raise InfraError(f"{self._what}: {self._crashed}")
        assert self._env is not None
        raw = turn.options.get(STEP_OPTION)
        if raw is not None:
            return await self._step(parse_step(raw))
        if self.spec.chat is None:
            raise TurnError(f"{self._what} has no chat block: a conversational test needs one (or give the test "
                            "steps)")
        from tamesu.targets.browser._chat import chat_turn

        return await self._widget_turn("a chat turn", chat_turn(self._env, self.spec.chat, turn,
                                                                self.spec.turn_timeout))

    async def _widget_turn(self, what: str, reading: Coroutine[Any, Any, AgentTurn]) -> AgentTurn:
        """One answer of the chat widget read, with the page as it was then kept (`steps/chat-NN.jpg`); the page
        as it was when the answer did not come too: what a user looks at first."""
        from playwright.async_api import Error as PlaywrightError

        self._chat_turns += 1
        label = f"chat-{self._chat_turns:02d}"
        try:
            answer = await reading
        except PlaywrightError as exc:
            await self._raise_if_crashed(what, exc)
            failure = f"the chat widget failed: {str(exc).splitlines()[0]}"
            raise TurnError(failure, raw={"failure": failure, "screenshot": await self._shoot(label)}) from None
        except TurnError as exc:
            raise TurnError(str(exc), raw={"failure": str(exc), "screenshot": await self._shoot(label)},
                            status=exc.status) from None
        if isinstance(answer.response, dict):
            answer.response["screenshot"] = await self._shoot(label)
        return answer

    async def _step(self, step: Step) -> AgentTurn:
        from playwright.async_api import Error as PlaywrightError

        from tamesu.targets.browser._actions import StepFailed, run_action
        from tamesu.targets.browser._goal import judge_page, pursue

        assert self._env is not None
        session = self._require_session()
        self._steps += 1
        number = self._steps
        record: dict[str, Any] = {"step": number, "kind": _kind(step), "what": describe(step)}
        sent = session.now_ms()
        failure: str | None = None
        try:
            if isinstance(step, GoalStep):
                outcome = await pursue(self._env, step, number, _seed(step.goal), self._shoot)
                self._goal_steps.append(len(outcome.steps))
                record.update(goal=step.goal, reached=outcome.reached, summary=outcome.summary,
                              agent_steps=[s.model_dump() for s in outcome.steps],
                              prompt_version=outcome.prompt_version)
                text = f"goal reached in {len(outcome.steps)} steps: {outcome.summary}" if outcome.reached else ""
                if not outcome.reached:
                    failure = f"goal {quoted(step.goal)} not reached: {outcome.summary}"
            elif isinstance(step, ExpectStep):
                verdict, seen, cuts = await judge_page(self._env, step)
                record.update(expect=step.expect, passed=verdict.passed, reason=verdict.reason,
                              evidence=verdict.evidence, model=verdict.model, prompt_version=verdict.prompt_version,
                              fake=verdict.fake, url=seen.url, cut=cuts)
                text = f"expect held: {verdict.reason}"
                if not verdict.passed:
                    seen_part = f" (the judge saw only {' and '.join(cuts)})" if cuts else ""
                    failure = f"expect {quoted(step.expect)} did not hold: {verdict.reason}{seen_part}"
            else:
                done = await run_action(self._env, step, number)
                record.update(action=step.action, **done)
                text = done.get("detail", "")
        except StepFailed as exc:
            failure = str(exc)
            record.update(exc.detail)
        except PlaywrightError as exc:
            await self._raise_if_crashed(f"step {number} ({describe(step)})", exc)
            failure = f"{describe(step)}: {str(exc).splitlines()[0]}"
        open_page = self._page is not None and not self._page.is_closed()
        record["url"] = userinfo_hidden(self._page.url) if self._page is not None and open_page else None
        record["screenshot"] = await self._shoot(f"{number:02d}-{_kind(step)}")
        if self._blocked_navigation and failure is None:
            # a navigation the step set off (a click, a script) may be blocked only after the step returned
            failure = f"the page tried to go to {self._blocked_navigation}, outside allowed_domains " \
                      f"({', '.join(self.spec.allowed_domains)})"
        self._blocked_navigation = None
        record["ok"] = failure is None
        session.event("browser_step", step=number, kind=_kind(step), what=describe(step), ok=failure is None,
                      screenshot=record["screenshot"])
        if failure is not None:
            record["failure"] = failure
            raise TurnError(failure, raw=record)
        return AgentTurn(text=text, response=record, raw=[record], sent_at_ms=sent, completed_at_ms=session.now_ms())

    async def _raise_if_crashed(self, during: str, exc: Exception) -> None:
        await asyncio.sleep(0.2)  # the disconnected event may arrive just after the failed call
        browser_gone = self._browser is not None and not self._browser.is_connected()
        if self._crashed or browser_gone or (self._page is not None and self._page.is_closed()):
            reason = self._crashed or "the browser exited"
            raise InfraError(f"{self._what}: {reason} during {during}: {str(exc).splitlines()[0]}") from None

    async def _shoot(self, label: str) -> str | None:
        """A screenshot of the page as it is now, kept as `steps/LABEL.jpg`; None when there is no page.
        JPEG, since Chromium encodes it several times faster than PNG and a record of a step needs no exact pixels
        (the `screenshot` and `visual` actions keep PNG)."""
        session = self._session
        if session is None or self._page is None or self._page.is_closed() or self._crashed:
            return None
        path = session.artifacts_dir / "steps" / f"{label}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            await self._page.screenshot(path=str(path), timeout=5000, type="jpeg", quality=70)
        except Exception:
            return None
        return path.relative_to(session.artifacts_dir).as_posix()

    def metrics(self) -> dict[str, float]:
        counted: dict[str, float] = {"browser_steps": float(self._steps)}
        if self._goal_steps:
            counted["goal_steps"] = float(max(self._goal_steps))
            counted["goal_steps_total"] = float(sum(self._goal_steps))
        counted["browser_blocked"] = float(len(self._blocked))
        return counted


def _kind(step: Step) -> str:
    return "goal" if isinstance(step, GoalStep) else "expect" if isinstance(step, ExpectStep) else step.action


def _seed(goal: str) -> int:
    """The same seed for the same goal on every run, so a replayed goal asks exactly what was recorded."""
    return int(hashlib.sha256(goal.encode()).hexdigest()[:8], 16) % 2**31


def _origin(url: str) -> str | None:
    """scheme://host[:port] of an http(s) URL, as a browser compares origins; None for any other URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc.lower()}"
