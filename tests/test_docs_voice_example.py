"""The voice target page's example is written for the reference bot (`examples/voice-bot`, its `/vonage` route):
its first step waits for words of the bot's greeting. The example was run by hand against the bot (it passes);
this keeps its words those the bot says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _greeting() -> str:
    tree = ast.parse((ROOT / "examples/voice-bot/bot.py").read_text(encoding="utf-8"))
    [value] = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "GREETING" for t in node.targets)
               and isinstance(node.value, ast.Constant)]
    return str(value)


def test_the_voice_pages_example_waits_for_what_the_reference_bot_says() -> None:
    page = (ROOT / "docs/targets/voice.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```yaml\n(.*?)```", page, flags=re.S)[:1]
    suite = yaml.safe_load(block)
    assert suite["targets"]["vonage"]["url"].endswith("/vonage")
    first = suite["tests"][0]["scenario"]["script"][0]
    assert re.search(first["wait_for"], _greeting()), (first, _greeting())
