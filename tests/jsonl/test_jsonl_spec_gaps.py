"""What the JSONL design states and a pass over it (session 32) found the program doing otherwise, each against a
real part: the example expense agent, fake models, the project's own script simulators."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from jsonl.test_jsonl_run import project, run_cases


async def test_json_path_and_type_read_an_answer_written_as_json_text(tmp_path: Path) -> None:
    # the design's `json_path` and `type` examples ($.status, $.count) check an agent that answers JSON; a model
    # (or an A2A agent, a gRPC one) answers it as text, which was never read: "$.status: no match"
    folder = project(tmp_path, "http://127.0.0.1:9")
    (folder / "json-bot.yaml").write_text(textwrap.dedent("""\
        - { when: "(?i)fenced", say: "```json\\n{\\"status\\": \\"ok\\"}\\n```" }
        - { say: "{\\"status\\": \\"ok\\", \\"count\\": 3}" }
        """))
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", "targets:\n  json-bot: { type: model, model: json-bot }\n", 1).replace(
        "models:\n", "models:\n  json-bot: { provider: fake, rules: json-bot.yaml }\n", 1))
    plain = {"id": "plain", "input": "Status?", "assertions": [
        {"type": "json_path", "path": "$.status", "value": "ok"},
        {"type": "type", "path": "$.count", "value": "number"},
        {"type": "equals", "path": "$.count", "value": 3}, {"type": "json_path", "path": "$.missing", "negate": True}]}
    fenced = {"id": "fenced", "input": "Fenced, please", "assertions": [
        {"type": "json_path", "path": "$.status", "value": "ok"}]}
    wrong = {"id": "wrong", "input": "Status?", "assertions": [
        {"type": "json_path", "path": "$.status", "value": "down"}]}
    text = "\n".join(json.dumps(case) for case in (plain, fenced, wrong))
    outcome, _ = await run_cases(folder, text, target="json-bot")
    by_id = {record.id: record for record in outcome.records}
    assert by_id["plain"].status == "passed", by_id["plain"].assertions
    assert [a.reason for a in by_id["plain"].assertions or []][:1] == ['$.status is "ok" in the text of turn 1']
    assert by_id["fenced"].status == "passed", by_id["fenced"].assertions
    assert by_id["wrong"].status == "failed"
    assert str((by_id["wrong"].assertions or [])[0].reason).startswith("$.status in the text of turn 1: ")
