"""`a11y`: axe-core's rules on the page (its script ships inside axe-playwright-python, nothing is fetched), and
optionally the page's aria snapshot against one the suite gives."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import expect

from tamesu.targets.browser._actions import PageEnv, StepFailed, artifact, locate
from tamesu.targets.browser._browser import _first_line
from tamesu.targets.browser.spec import IMPACTS, ActionStep, selector_text

_RUN = """async ([scope, options]) => {
  const results = await axe.run(scope ? document.querySelector(scope) : document, options);
  return results.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' '))}));
}"""


def _axe_script() -> str:
    from axe_playwright_python.base import AXE_SCRIPT

    script: str = AXE_SCRIPT  # the package ships no types: its script is a str constant
    return script


async def check_a11y(env: PageEnv, step: ActionStep, timeout: float) -> dict[str, object]:
    page = env.page
    if step.aria is not None:
        scope = locate(page, step.selector) if step.selector is not None else page.locator("body")
        try:
            await expect(scope).to_match_aria_snapshot(step.aria, timeout=timeout)
        except AssertionError:
            actual = await scope.aria_snapshot(timeout=timeout)
            path = artifact(env, f"aria-{len(env.session.events):03d}.yaml")
            path.write_text(actual, encoding="utf-8")
            raise StepFailed(f"a11y: the aria snapshot of {selector_text(step.selector)} does not match "
                             f"(the page's is in {path.name})", {"aria": actual}) from None
    options: dict[str, Any] = {"resultTypes": ["violations"]}
    if step.rules:
        options["runOnly"] = {"type": "rule", "values": step.rules}
    if step.disable:
        options["rules"] = {rule: {"enabled": False} for rule in step.disable}
    scope_css = step.selector if isinstance(step.selector, str) else None
    try:
        if not await page.evaluate("typeof axe !== 'undefined'"):
            await page.evaluate(_axe_script())
        violations: list[dict[str, Any]] = await page.evaluate(_RUN, [scope_css, options])
    except PlaywrightError as exc:
        raise StepFailed(f"a11y: axe could not run: {_first_line(exc)}") from None
    floor = IMPACTS.index(step.impact)
    failing = [v for v in violations if v.get("impact") in IMPACTS and IMPACTS.index(v["impact"]) >= floor]
    if failing:
        listed = "; ".join(f"{v['id']} ({v['impact']}, {len(v['nodes'])} node{'s' if len(v['nodes']) != 1 else ''}: "
                           f"{', '.join(v['nodes'][:3])})" for v in failing)
        raise StepFailed(f"a11y: {len(failing)} axe violation{'s' if len(failing) != 1 else ''} at or above "
                         f"{step.impact}: {listed}", {"violations": violations})
    below = len(violations)
    return {"detail": f"no axe violation at or above {step.impact}" + (f" ({below} below it)" if below else ""),
            "result": {"violations": violations}}
