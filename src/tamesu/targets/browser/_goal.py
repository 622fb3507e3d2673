"""`goal` and `expect` steps: the model-driven ones. The browser agent acts through the same actions as
`action` steps (one tool per action, same arguments); the judge grades `expect` against the page."""

from __future__ import annotations

import base64
from typing import Any

from pydantic import ValidationError

from tamesu.errors import InfraError
from tamesu.models.base import MessageFile, ModelError, ToolSpec
from tamesu.net.urls import userinfo_hidden, userinfo_restored
from tamesu.roles.browser_agent import SNAPSHOT_LIMIT, BrowserAgent, GoalOutcome, Observation
from tamesu.roles.judge import Judge, JudgeInput, JudgeVerdict, Line
from tamesu.targets.browser._actions import PageEnv, StepFailed, run_action
from tamesu.targets.browser._browser import _first_line
from tamesu.targets.browser._frames import inside_frames
from tamesu.targets.browser.spec import ActionStep, ExpectStep, GoalStep

_SELECTOR = {"description": "A CSS selector, or {role, name} (an accessible role and name)",
             "anyOf": [{"type": "string"},
                       {"type": "object", "properties": {"role": {"type": "string"}, "name": {"type": "string"}},
                        "required": ["role"]}]}

_FRAME = {"type": "string",
          "description": "For an element inside an iframe: the iframe's selector, as the page shows it after "
                         "'act in it with frame:'"}

AGENT_ACTIONS: dict[str, tuple[str, dict[str, object], list[str]]] = {
    "navigate": ("Open a URL.", {"url": {"type": "string"}}, ["url"]),
    "click": ("Click an element.", {"selector": _SELECTOR, "frame": _FRAME}, ["selector"]),
    "fill": ("Type a value into a field, replacing what it holds.",
             {"selector": _SELECTOR, "value": {"type": "string"}, "frame": _FRAME}, ["selector", "value"]),
    "press": ("Press a key (Enter, Tab, ArrowDown...), in an element or the page.",
              {"key": {"type": "string"}, "selector": _SELECTOR, "frame": _FRAME}, ["key"]),
    "wait": ("Wait for an element or a text to be visible, or a number of milliseconds.",
             {"selector": _SELECTOR, "text": {"type": "string"}, "ms": {"type": "integer"}, "frame": _FRAME}, []),
    "eval_js": ("Evaluate a JavaScript expression in the page (or an iframe) and see its value.",
                {"script": {"type": "string"}, "frame": _FRAME}, ["script"]),
    "assert_text": ("Check that a text is on the page (or in an element).",
                    {"text": {"type": "string"}, "selector": _SELECTOR, "frame": _FRAME}, ["text"]),
    "assert_url": ("Check the page's URL.", {"url": {"type": "string"}}, ["url"]),
    "screenshot": ("Save a screenshot under a name.", {"name": {"type": "string"}, "selector": _SELECTOR,
                                                       "frame": _FRAME}, []),
}
"""The actions offered to the agent: every deterministic action but mock, a11y and visual, which test the
site rather than use it; `frame` on those that look for something in a document (`FRAME_ACTIONS`), as a step's."""


def agent_tools() -> list[ToolSpec]:
    return [ToolSpec(name=name, description=text,
                     parameters={"type": "object", "properties": props, "required": required})
            for name, (text, props, required) in AGENT_ACTIONS.items()]


async def observe(env: PageEnv) -> Observation:
    page = env.page
    try:
        aria = await page.locator("body").aria_snapshot(timeout=env.spec.step_timeout * 1000)
        title = await page.title()
    except Exception as exc:  # a page mid-navigation has no body yet: show what there is
        if page.is_closed():
            raise
        aria, title = f"(the page could not be read: {_first_line(exc)})", ""
    if framed := await inside_frames(page, "aria", env.spec.step_timeout * 1000):
        aria = f"{aria}\n{framed}"
    picture = await _picture(env) if env.spec.vision else None
    # the model's request reaches the replay cache and the run's records: never a user:password@ in it (the
    # agent's urls on the origin get it back in `pursue`)
    return Observation(url=userinfo_hidden(page.url), title=title, aria=aria, screenshot=picture)


async def _picture(env: PageEnv) -> MessageFile | None:
    """The viewport as a JPEG for a model to look at; a page that cannot be shot is said in the run's events
    and the model goes on with the text alone."""
    try:
        shot = await env.page.screenshot(type="jpeg", quality=70, timeout=env.spec.step_timeout * 1000)
    except Exception as exc:
        if env.page.is_closed():
            raise
        env.session.event("vision_screenshot_failed", url=userinfo_hidden(env.page.url), reason=_first_line(exc))
        return None
    return MessageFile(name="page.jpg", mime="image/jpeg", data=base64.b64encode(shot).decode("ascii"))


async def pursue(env: PageEnv, step: GoalStep, number: int, seed: int, shoot: Any) -> GoalOutcome:
    """Run the browser agent on `step.goal`; `shoot(label)` saves the screenshot of each agent step."""
    models = env.session.models
    if models is None:
        raise InfraError(f"goal steps need a model: set models.{env.spec.model}")
    try:
        client = models.client(env.spec.model)
    except ModelError as exc:
        raise InfraError(str(exc)) from exc
    agent = BrowserAgent(client, agent_tools(), seed=seed)

    async def act(name: str, args: dict[str, Any], k: int) -> tuple[bool, str, str | None]:
        if name not in AGENT_ACTIONS:
            return False, f"error: there is no action {name!r} (actions: {', '.join(AGENT_ACTIONS)}, done, " \
                          "give_up)", None
        given = {**args, "action": name}
        if isinstance(url := args.get("url"), str):  # the page's url it saw had `***@` for the suite's password
            given["url"] = userinfo_restored(url, env.userinfo)
        try:
            action = ActionStep.model_validate(given)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            return False, f"error: bad arguments for {name}: {problems}", None
        env.session.event("browser_agent_action", step=number, agent_step=k, action=name, args=args)
        try:
            done = await run_action(env, action, number, written=False)
            outcome, ok = f"ok: {done.get('detail', '')}", True
        except (StepFailed, InfraError) as exc:
            # a link that leads nowhere is something the agent should see and get round, not a broken run
            outcome, ok = f"failed: {exc}", False
        return ok, outcome, await shoot(f"{number:02d}-goal-{k:02d}")

    return await agent.pursue(step.goal, lambda: observe(env), act, step.max_steps)


PAGE_TEXT_LIMIT = 8000
"""Characters of the page's text the judge of an `expect` step sees; a longer text is cut, and the cut said."""


def _cut(text: str, limit: int, what: str, cuts: list[str]) -> str:
    if len(text) <= limit:
        return text
    cuts.append(f"the first {limit} of {len(text)} characters of {what}")
    return text[:limit] + f"\n(cut: the first {limit} of {len(text)} characters of {what} are shown)"


async def judge_page(env: PageEnv, step: ExpectStep) -> tuple[JudgeVerdict, Observation, list[str]]:
    """The judge grades the rubric against the page's text, with its aria snapshot and URL as context; the third
    value says what of them was cut (the judge is told too), since what it never saw it says is not there."""
    models = env.session.models
    if models is None:
        raise InfraError("expect steps need a model: set models.judge")
    try:
        client = models.client("judge", step.model)
    except ModelError as exc:
        raise InfraError(str(exc)) from exc
    seen = await observe(env)
    try:
        text = await env.page.locator("body").inner_text(timeout=env.spec.step_timeout * 1000)
    except Exception as exc:
        if env.page.is_closed():
            raise
        text = f"(no text: {_first_line(exc)})"
    if framed := await inside_frames(env.page, "text", env.spec.step_timeout * 1000):
        text = f"{text}\n{framed}"
    cuts: list[str] = []
    page_text = f"page {seen.url} ({seen.title or 'no title'}):\n" \
                f"{_cut(' '.join(text.split()), PAGE_TEXT_LIMIT, 'the page text', cuts)}"
    aria = _cut(seen.aria, SNAPSHOT_LIMIT, "the aria snapshot", cuts)
    verdict = await Judge(client).grade(JudgeInput(
        rubric=step.expect, transcript=[Line(role="agent", text=page_text)],
        context=f"url: {seen.url}\ntitle: {seen.title}\naria snapshot:\n{aria}",
        metrics={}, images=[seen.screenshot] if seen.screenshot is not None else []))
    return verdict, seen, cuts
