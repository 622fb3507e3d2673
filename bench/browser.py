"""The browser target's figures: `python bench/browser.py` (or `make bench-browser`).

It serves examples/web-shop, then drives tamesu's own BrowserTarget (the code a run uses) in Debian's Chromium:

- browser start: Playwright's driver plus Chromium, until a browser answers (median of 3 cold starts);
- a run's page: a fresh context with trace and HAR, the shop loaded, closed with its trace written (median);
- a step: `assert_text` and `click` steps, each with its screenshot (median over 20);
- conversations at once through the chat widget: 1, 5 and 10 contexts in one browser, 3 turns each: wall
  time, CPU of tamesu's process and of Chromium's processes per conversation, and Chromium's memory with every
  context open (PSS, so pages the processes share count once). Goal: 10 contexts under 1.5 GiB.

Writes bench/results/browser-<date>.json and prints the markdown table docs/performance.md shows.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tamesu.conversation import Session, UserTurn  # noqa: E402
from tamesu.suite.secrets import Redactor  # noqa: E402
from tamesu.suite.templates import Context  # noqa: E402
from tamesu.targets.browser import STEP_OPTION, BrowserTarget, _browser  # noqa: E402
from tamesu.targets.browser.spec import BrowserSpec  # noqa: E402

GOAL_MIB = 1536


def start_shop() -> tuple[subprocess.Popen[str], str]:
    shop = subprocess.Popen([sys.executable, str(ROOT / "examples" / "web-shop" / "shop.py"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert shop.stdout is not None
    for line in shop.stdout:
        if match := re.search(r"listening on (http://\S+/)", line):
            return shop, match.group(1)
    raise SystemExit("the web shop did not start")


def session(folder: Path) -> Session:
    return Session(context=Context(env=dict(os.environ)), artifacts_dir=folder, redactor=Redactor(),
                   run_id="bench", base_dir=ROOT / "examples" / "web-shop")


def _children(root: int) -> list[int]:
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            try:
                kids = (task / "children").read_text().split()
            except OSError:
                continue
            for kid in map(int, kids):
                found.append(kid)
                frontier.append(kid)
    return found


def chromium_pids() -> list[int]:
    pids = []
    for pid in _children(os.getpid()):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"chromium" in command:
            pids.append(pid)
    return pids


def cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def pss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def own_cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


async def browser_start() -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        await _browser.acquire(headless=True, cdp_url=None)
        times.append(time.perf_counter() - started)
        await _browser.shutdown()
    return statistics.median(times)


async def page_and_steps(url: str, scratch: Path) -> tuple[float, float, float]:
    spec = BrowserSpec(type="browser", url=url, allowed_domains=["127.0.0.1"])
    opens, closes, steps = [], [], []
    for run in range(5):
        target = BrowserTarget(spec, "shop")
        started = time.perf_counter()
        await target.open(session(scratch / f"page-{run}"))
        opens.append(time.perf_counter() - started)
        for k in range(4):
            step = {"action": "assert_text", "text": "Find a book"} if k % 2 == 0 else \
                {"action": "click", "selector": "#q"}
            began = time.perf_counter()
            await target.send(UserTurn(text="step", source="step", options={STEP_OPTION: step}))
            steps.append(time.perf_counter() - began)
        began = time.perf_counter()
        await target.close()
        closes.append(time.perf_counter() - began)
    return statistics.median(opens), statistics.median(closes), statistics.median(steps)


async def conversations(url: str, count: int, scratch: Path) -> dict[str, Any]:
    spec = BrowserSpec.model_validate({
        "type": "browser", "url": f"{url}help", "allowed_domains": ["127.0.0.1"], "trace": False,
        "chat": {"input": "#chat-input", "send": {"role": "button", "name": "Send"},
                 "messages": "#chat-log .msg.agent", "done": {"hidden": "#typing"}}})
    await _browser.acquire(headless=True, cdp_url=None)
    targets = [BrowserTarget(spec, f"widget-{i}") for i in range(count)]
    pids = chromium_pids()
    cpu_before, own_before = cpu_seconds(pids), own_cpu()
    started = time.perf_counter()
    await asyncio.gather(*(t.open(session(scratch / f"chat-{count}-{i}")) for i, t in enumerate(targets)))
    peak = pss_mib(chromium_pids())
    turns = ["Where is my order ORD-1001?", "And ORD-1002?", "Thanks, bye"]

    async def talk(target: BrowserTarget) -> None:
        nonlocal peak
        for said in turns:
            answer = await target.send(UserTurn(text=said))
            assert answer.text, "the widget gave no answer"
            peak = max(peak, pss_mib(chromium_pids()))

    await asyncio.gather(*(talk(t) for t in targets))
    wall = time.perf_counter() - started
    pids = chromium_pids()
    chromium_cpu = cpu_seconds(pids) - cpu_before
    own = own_cpu() - own_before
    await asyncio.gather(*(t.close() for t in targets))
    await _browser.shutdown()
    return {"count": count, "wall_s": round(wall, 3), "turns_per_s": round(count * len(turns) / wall, 2),
            "chromium_cpu_s_per_conversation": round(chromium_cpu / count, 3),
            "tamesu_cpu_s_per_conversation": round(own / count, 3),
            "chromium_pss_mib": round(peak, 1)}


async def main(sizes: list[int]) -> dict[str, Any]:
    shop, url = start_shop()
    try:
        with tempfile.TemporaryDirectory() as folder:
            scratch = Path(folder)
            start = await browser_start()
            await _browser.acquire(headless=True, cdp_url=None)
            opened, closed, step = await page_and_steps(url, scratch)
            await _browser.shutdown()
            chats = [await conversations(url, n, scratch) for n in sizes]
    finally:
        shop.terminate()
        shop.wait(timeout=10)
    return {"date": dt.date.today().isoformat(), "cores": os.cpu_count(), "browser_start_s": round(start, 3),
            "run_open_s": round(opened, 3), "run_close_s": round(closed, 3), "step_s": round(step, 3),
            "conversations": chats}


def table(result: dict[str, Any]) -> str:
    rows = [
        "| figure | value | goal | met |",
        "| --- | --- | --- | --- |",
        f"| browser start (Playwright driver + Chromium), median of 3 | {result['browser_start_s']:.2f} s | | |",
        f"| a run's page: new context with trace and HAR, shop loaded | {result['run_open_s'] * 1000:.0f} ms | | |",
        f"| closing it (trace and HAR written) | {result['run_close_s'] * 1000:.0f} ms | | |",
        f"| one step (assert_text or click) with its screenshot, median | {result['step_s'] * 1000:.0f} ms | | |",
    ]
    for chat in result["conversations"]:
        n = chat["count"]
        met = "yes" if chat["chromium_pss_mib"] < GOAL_MIB else "no"
        goal = f"< {GOAL_MIB} MiB" if n == 10 else ""
        rows.append(f"| {n} widget conversation{'s' if n > 1 else ''} at once, 3 turns: wall "
                    f"{chat['wall_s']:.2f} s, {chat['turns_per_s']:.1f} turns/s, CPU per conversation "
                    f"{chat['chromium_cpu_s_per_conversation']:.2f} s Chromium + "
                    f"{chat['tamesu_cpu_s_per_conversation']:.2f} s tamesu | Chromium memory (PSS) "
                    f"{chat['chromium_pss_mib']:.0f} MiB, {chat['chromium_pss_mib'] / n:.0f} MiB per context | "
                    f"{goal} | {met if n == 10 else ''} |")
    return "\n".join(rows)


if __name__ == "__main__":
    from _owned import own_children

    own_children()
    parser = argparse.ArgumentParser(description="the browser target's figures")
    parser.add_argument("--quick", action="store_true", help="1 and 2 conversations only, nothing written")
    args = parser.parse_args()
    measured = asyncio.run(main([1, 2] if args.quick else [1, 5, 10]))
    print(table(measured))
    if not args.quick:
        out = ROOT / "bench" / "results" / f"browser-{measured['date']}.json"
        out.write_text(json.dumps(measured, indent=2) + "\n")
        print(f"written {out.relative_to(ROOT)}")
