"""The agent's spans that came after their run was graded, said in that run's result.json.

A run waits `traces.wait` for its spans, then is graded and written; a span of its traces that comes later (a
batching exporter's next batch, while later tests run) is counted by the collector (`Dropped.late_in`) and said in
the invocation's warnings. Its run's own record said nothing of it: its result.json showed every check decided on
what had come, and its spans.json was short of them. At the end of the invocation each such run's result.json gets
one warning naming them, so whoever reads that run alone learns its spans were incomplete (and the HTML report,
which reads result.json, shows it in that run's section). An invocation a second signal cancelled before its end
still writes them, as it writes run.json (`tell_spans`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from tamesu.engine.artifacts import RunDirectory
from tamesu.matching import one_line
from tamesu.results.records import run_result_from_json

_NAMED = 5
"""The span names said, the most frequent first; the rest are counted."""
_NAME_CHARS = 80


def late_words(named: Mapping[str, int]) -> str:
    """The warning of a run whose late spans were `named` (each name with how many; "" counts the names not kept)."""
    count = sum(named.values())
    kept = sorted(((n, c) for n, c in named.items() if n), key=lambda item: -item[1])
    said = [f"{one_line(name, _NAME_CHARS)}" + (f" ({times})" if times > 1 else "") for name, times in kept[:_NAMED]]
    rest = count - sum(times for _name, times in kept[:_NAMED])
    if rest:
        said.append(f"{rest} more")
    return (f"traces: {count} span(s) of this run came after it was graded, so no check read them and spans.json "
            f"does not hold them (raise traces.wait): {', '.join(said)}")


def say_late_spans(late_in: Mapping[str, Mapping[str, int]], directory: RunDirectory) -> None:
    """Add the warning to the result.json of each run in `late_in` (its folder); one that was not written (a run
    cut short) or cannot be read or written again is left as it is: the invocation's warning still says them."""
    for folder, named in late_in.items():
        path = os.path.join(folder, "result.json")
        try:
            with open(path, encoding="utf-8") as handle:
                result = run_result_from_json(handle.read())
        except (OSError, ValueError):
            continue
        result.warnings.append(late_words(named))
        try:
            directory.write_json(path, result)
        except OSError:
            continue


def tell_spans(said: list[str], warnings: list[str], warn: Callable[[str], None],
               late_in: Mapping[str, Mapping[str, int]], directory: RunDirectory) -> bool:
    """The receivers' warnings at their stop (`said`: spans no run kept) added to run.json's `warnings` and
    `warn`ed on the console; each run's late spans said in its result.json. True: told."""
    for line in said:
        warnings.append(line)
        warn(line)
    say_late_spans(late_in, directory)
    return True
