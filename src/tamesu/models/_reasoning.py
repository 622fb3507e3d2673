"""A reasoning model's thinking, told apart from its answer when a server sends both as one text.

Servers that run open reasoning models (Qwen3, DeepSeek-R1, gpt-oss...) without a reasoning parser, as
llama.cpp, LM Studio, vLLM and proxies in front of them do by default or by option, put the model's thinking at
the head of the message's content, between `<think>` tags. Read as the answer, that thinking became what a
simulated user said to the agent, and made every judge's verdict "surrounded by other text". Models served with a
chat template that opens the block itself send only the closing tag.
"""

from __future__ import annotations

import re

_OPENING = re.compile(r"\A\s*<(think|thinking)>", re.IGNORECASE)
_CLOSING = {"think": re.compile(r"</think>", re.IGNORECASE), "thinking": re.compile(r"</thinking>", re.IGNORECASE)}


def split_reasoning(content: str) -> tuple[str, str | None]:
    """The answer and the reasoning taken from its head (None when there was no reasoning block).

    A block still open at the end (the answer cut at its token limit while the model thought) is all
    reasoning: the answer is empty."""
    opening = _OPENING.match(content)
    if opening is not None:
        rest = content[opening.end():]
        closing = _CLOSING[opening.group(1).lower()].search(rest)
        if closing is None:
            return "", rest.strip()
        return rest[closing.end():].lstrip(), rest[:closing.start()].strip()
    closings = list(_CLOSING["think"].finditer(content))  # a template that opened the block: only its end
    if len(closings) == 1 and "<think" not in content[:closings[0].start()].lower():
        return content[closings[0].end():].lstrip(), content[:closings[0].start()].strip()
    return content, None
