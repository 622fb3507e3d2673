"""`visual`: a screenshot against a baseline kept beside the suite (`__visual__/NAME.png`), compared by
pixelmatch's rules (`_pixels`, numpy); `--update-golden` writes the baseline instead."""

from __future__ import annotations

import io

from tamesu.errors import SuiteProblem
from tamesu.targets.browser._actions import PageEnv, StepFailed, artifact, one_element
from tamesu.targets.browser.spec import ActionStep

BASELINES = "__visual__"


async def compare(env: PageEnv, step: ActionStep, timeout: float) -> dict[str, object]:
    from PIL import Image

    from tamesu.targets.browser._pixels import compare as count_pixels

    assert step.name is not None
    if step.selector is not None:
        # one element, as a screenshot's: several were Playwright's strict-mode line, cut before its list
        element = await one_element(env, step, "visual")
        shot = await element.screenshot(timeout=timeout, animations="disabled")
    else:
        shot = await env.page.screenshot(full_page=step.full_page, timeout=timeout, animations="disabled")
    baseline = env.session.base_dir / BASELINES / f"{step.name}.png"
    shown = f"{BASELINES}/{step.name}.png"
    actual_path = artifact(env, f"visual/{step.name}.png")
    actual_path.write_bytes(shot)
    if env.update_golden:
        baseline.parent.mkdir(parents=True, exist_ok=True)
        baseline.write_bytes(shot)
        return {"detail": f"baseline {shown} written"}
    if not baseline.is_file():
        # the suite's to set up, not the page's failure: the run is an error, as a missing golden file's is
        raise SuiteProblem(f"visual: no baseline {shown}: {env.session.write_golden}")
    actual = Image.open(io.BytesIO(shot)).convert("RGBA")
    expected = Image.open(baseline).convert("RGBA")
    if actual.size != expected.size:
        raise StepFailed(f"visual {step.name}: the screenshot is {actual.size[0]}x{actual.size[1]}, the baseline "
                         f"{expected.size[0]}x{expected.size[1]}")
    total = actual.size[0] * actual.size[1]
    differing, diff = count_pixels(expected, actual, step.pixel_threshold)
    share = differing / total
    record = {"pixels": differing, "share": round(share, 6), "threshold": step.threshold}
    if share > step.threshold:
        diff_path = artifact(env, f"visual/{step.name}-diff.png")
        diff.save(diff_path)
        raise StepFailed(f"visual {step.name}: {differing} pixels ({share:.2%}) differ from {shown}, more than "
                         f"{step.threshold:.2%} (diff in visual/{diff_path.name})", record)
    return {"detail": f"{differing} pixels ({share:.2%}) differ from {shown}", "result": record}
