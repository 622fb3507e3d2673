"""JSONL agent tests (`tamesu test`): a second front door to the same engine.

A JSONL file holds one test case per line: standard (one call with a message history), multi-turn (static
turns, then a simulator, a person or `on_missing_input` while the agent awaits input) or dynamic (a simulator
until every checkpoint is reached). Cases become the engine's planned tests and run through
`engine.conversation.execute_run` against the same targets, with the same models and checks, leaving the same
artifacts; `records` and `console` give the design's JSONL output and console tree.

Modules: `schema` (what users write), `parser` (file:line:col errors), `assertions` and `checks` (the design's
assertion types on the engine's checks), `awaiting` (is the agent waiting for the user?), `user` (the user
side of a case), `simulators`, `human` (`--interactive`), `checkpoints`, `generator` and `sources` (`-i`),
`targets` (`-n`), `run` (cases through the engine), `records`, `console`.
"""
