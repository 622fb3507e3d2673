"""A script generator (`-i "scripts:scripts.generate:cases?scenario=approval-flow"`): returns test cases."""

from __future__ import annotations

from typing import Any

AMOUNTS = {"approval-flow": [12_000, 50_000], "small": [20, 75]}


def cases(params: dict[str, Any]) -> list[dict[str, Any]]:
    """One standard case per amount of the scenario: over the limit the agent asks for a PO number."""
    scenario = str(params.get("scenario", "small"))
    made = []
    for amount in AMOUNTS.get(scenario, AMOUNTS["small"]):
        expected = "PO number" if amount > 10_000 else "Please confirm"
        made.append({"id": f"{scenario}-{amount}", "name": f"{scenario}: ${amount:,}",
                     "input": f"Equipment, ${amount}", "assertions": [{"type": "contains", "value": expected}]})
    return made
