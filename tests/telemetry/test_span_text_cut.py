"""A span attribute longer than the report's hover (or the judge's summary) shows is cut with `…`: the redactor
masks a secret's head only before an ellipsis, so a bare cut kept the head of a key the cut fell in."""

from __future__ import annotations

from tamesu.report.waterfall import _hover
from tamesu.suite.secrets import Redactor
from tamesu.telemetry.genai import summary
from tamesu.telemetry.spans import Span

KEY = "zq7-span-9f31-aa08-key-of-the-agent"


def test_a_long_attribute_keeps_no_head_of_a_secret_in_the_summary_or_the_hover() -> None:
    # before: the hover's `text[:300]`, "zq7-span-9f31-aa08-k" in report.html after masking (the summary's
    # `...` was masked as an ellipsis already: checked as well)
    redactor = Redactor()
    redactor.add(KEY)
    span = Span(trace_id="1" * 32, span_id="2" * 16, name="execute_tool lookup", turn=1,
                attributes={"gen_ai.tool.call.arguments": "a " * 140 + KEY + " b" * 200})
    for shown in (summary([span]), _hover(span)):
        masked = redactor.text(shown)
        assert KEY[:6] not in masked, masked
