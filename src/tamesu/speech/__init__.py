"""Matching what an agent said aloud the way a listener does (pure Python: no voice extra needed).

Speech-to-text writes what it hears in its own way: "Press one for appointment. Two for billing." for an
agent that said "Press 1 for appointments, 2 for billing". On audio turns `wait_for`, `contains`,
`not_contains`, `regex` and `capture` therefore read the agent's words normalised for speech:

- `words`: case and punctuation ignored, numbers and digits alike (each number a run of single digits, so
  "2" = "two", "7pm" = "seven p.m.", "ORD-1001" = "O R D one zero zero one"), fillers ("um", "uh") dropped;
- `phrase`: a phrase is heard when its words occur in order within a span of at most twice its length, with
  at most one word in five missed or misheard (`similarity`, default 0.8); every number of the phrase must
  be heard exactly. The result says what was heard and how it matched.

Text targets keep exact matching; `match: exact` opts an audio check out.
"""
