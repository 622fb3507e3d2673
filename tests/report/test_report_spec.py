"""`--report` and `report:` entries that name no format say the one they are near."""

from __future__ import annotations

import pytest

from tamesu.report.spec import ReportSpecError, parse_reports


@pytest.mark.parametrize(("written", "said"), [
    # was "unknown report 'jsn' in 'jsn' (one of ...)": the name twice, the format it is near never
    ("jsn", "unknown report 'jsn' (did you mean 'json'? one of github, html, json, junit, markdown)"),
    ("Junit:out/j.xml", "unknown report 'Junit' in 'Junit:out/j.xml' (did you mean 'junit'? one of github, html, "
                        "json, junit, markdown)"),
    ("pdf", "unknown report 'pdf' (one of github, html, json, junit, markdown)"),
])
def test_an_unknown_report_names_the_one_it_is_near(written: str, said: str) -> None:
    with pytest.raises(ReportSpecError) as refused:
        parse_reports(written)
    assert str(refused.value) == said
