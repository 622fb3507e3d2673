"""`tamesu init`: a project file and a first suite that validate as written."""

from __future__ import annotations

from pathlib import Path

PROJECT = """\
# yaml-language-server: $schema=.tamesu/schema/project.schema.json
# tamesu project file: what every suite of this folder shares.
suites: ["suites/*.yaml"]
out: tamesu-runs
defaults:
  slo:
    turn_latency_ms_p95: 5000      # every test: 95% of turns answered within 5 s
secrets:
  env_files: [.env]               # {{secrets.X}} reads the environment, then these files
"""

FIRST_SUITE = """\
# yaml-language-server: $schema=../.tamesu/schema/suite.schema.json
# A first suite. Point the target at your agent, then: tamesu run
targets:
  my-agent:
    type: rest
    url: http://127.0.0.1:8080/chat
    request:
      body: { message: "{{message}}", session_id: "{{session}}" }
    response:
      text: $.reply

tests:
  - name: greets and answers
    target: my-agent
    tags: [smoke]
    scenario:
      script:
        - say: "Hello! What can you help me with?"
        - say: "Thanks, that is all."
    assert:
      - not_contains: "Traceback"
      - turns: { equals: 2 }
      - metric: { name: turn_latency_ms, lt: 10000 }
"""


def write_scaffold(directory: Path) -> list[Path]:
    """The two files, plus the JSON Schemas their first lines point editors at (`tamesu schema --write`
    refreshes them after an upgrade). Local files, so completion works offline and nothing is fetched."""
    from tamesu.schema_export import SCHEMA_DIR, write_schemas

    files = {directory / "tamesu.yaml": PROJECT, directory / "suites" / "first.yaml": FIRST_SUITE}
    for path in files:
        if path.exists():
            raise FileExistsError(str(path))
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    written.extend(write_schemas(directory / SCHEMA_DIR))
    return written
