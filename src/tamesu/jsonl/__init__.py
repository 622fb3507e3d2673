"""JSONL agent tests (`tamesu test`): a loader in front of the one engine.

One test case per line: standard (one call with a message history), multi-turn (static turns, then a simulator,
a person or `on_missing_input`) or dynamic (a simulator until every checkpoint is reached). Here: `schema` (what
users write), `parser` (file:line:col errors; the JSON lines are read with their positions by `suite.json_lines`),
`assertions` (the design's assertion types on the engine's checks), `sources` and `generator` (`-i`), `run`
(cases as the engine's planned tests). The user side is `roles.case_user`, checkpoints `checks.checkpoint`, `-n`
`plan.targets`, the records and console `report`.
"""
