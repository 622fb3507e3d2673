"""The run's model spending is counted in `models.ledger.Totals` and recorded as `results.records.ModelSpend`.

The runner copies one into the other by field name, and pydantic ignores a keyword it does not know: a counter
added to the ledger and not to the record would be counted and then dropped from run.json without a word.
"""

from __future__ import annotations

import dataclasses

from tamesu.models.ledger import Totals
from tamesu.results.records import ModelSpend


def test_every_counter_the_ledger_keeps_is_a_field_run_json_records() -> None:
    counted = {field.name for field in dataclasses.fields(Totals)}
    recorded = set(ModelSpend.model_fields)
    assert counted == recorded, f"ledger only: {counted - recorded}; record only: {recorded - counted}"


def test_a_ledger_totals_becomes_a_record_with_every_value_kept() -> None:
    totals = Totals(usd=0.5, input_tokens=3, output_tokens=4, calls=2, cached_calls=1, fake_calls=1, retries=5,
                    timeouts=6)
    assert ModelSpend(**vars(totals)).model_dump() == vars(totals)
