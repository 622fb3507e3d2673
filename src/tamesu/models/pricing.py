"""What a model call costs: a small table of list prices, overridable per model with `price:`.

The table only has to be good enough for budgets and the `llm_cost_usd` metric; a model it does not know
costs 0, and under a dollar budget the plan warns of it (`tamesu.plan._lint.unpriced_models`).
"""

from __future__ import annotations

import functools
import re

from tamesu.models.base import Usage
from tamesu.models.spec import ModelSpec, PriceSpec

# USD per million tokens (input, output): the providers' published list prices for standard (not batch,
# not cached-input) use, as of 2025-11. Prices change; a `price:` in the model's spec wins over this table.
_TABLE: dict[str, tuple[float, float]] = {
    # OpenAI
    "gpt-4o": (2.50, 10.00),
    "chatgpt-4o-latest": (5.00, 15.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    # Anthropic
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-opus-4-0": (15.00, 75.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-opus": (15.00, 75.00),
}

# What may follow a table name and still be the same model: a date stamp (`-2024-08-06`, `-20250514`),
# `-latest`, or a version suffix some gateways add (`-v1:0`).
_SUFFIX = re.compile(r"^(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|-\d{4})?(-v\d+(:\d+)?)?$")


def _normalise(model: str) -> str:
    # gateways name models `openai/gpt-4o-mini` (OpenRouter) or `anthropic.claude-...` (Bedrock)
    name = model.strip().lower().rsplit("/", 1)[-1]
    for prefix in ("anthropic.", "openai."):
        name = name.removeprefix(prefix)
    return name


_LONGEST_FIRST = sorted(_TABLE, key=len, reverse=True)


@functools.lru_cache(maxsize=256)
def _listed(model: str) -> tuple[float, float] | None:
    """The table's (input, output) price of a model name: looked up once a name, not once a call (every model
    call is priced, and the search tried the table's names one by one)."""
    name = _normalise(model)
    # the longest table name that the model name starts with, followed only by a date or version
    for known_name in _LONGEST_FIRST:
        if name.startswith(known_name) and _SUFFIX.match(name[len(known_name):]):
            return _TABLE[known_name]
    return None


def price(model: str) -> PriceSpec | None:
    """The table's price for a model name, or None when the table does not know it."""
    listed = _listed(model)
    if listed is None:
        return None
    return PriceSpec(input_per_mtok=listed[0], output_per_mtok=listed[1])


def known(model: str) -> bool:
    """Whether the price table has this model (an unknown model is counted as costing nothing)."""
    return price(model) is not None


def cost(spec_or_model: ModelSpec | str, usage: Usage, override: PriceSpec | None = None) -> float:
    """Dollars for one call: `override`, else the spec's own `price:`, else the table, else 0."""
    if isinstance(spec_or_model, ModelSpec):
        if spec_or_model.provider == "fake":
            return 0.0
        override = override or spec_or_model.price
        model = spec_or_model.model
    else:
        model = spec_or_model
    rate = override or price(model)
    if rate is None:
        return 0.0
    dollars = (usage.input_tokens * rate.input_per_mtok + usage.output_tokens * rate.output_per_mtok) / 1_000_000
    # keep sums readable in reports: float noise below a billionth of a dollar means nothing here
    return round(dollars, 9)
