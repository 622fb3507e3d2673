"""A run's records written to its folder (transcript.json, result.json, spans.json): a record no JSON holds (an
answer nested too deep) is only that run's error, written in its place as a crashed run's; it never ends the
whole run. A folder that cannot be written (`OSError`) is the caller's to say."""

from __future__ import annotations

import os
from pathlib import Path

from tamesu.engine.artifacts import RunDirectory
from tamesu.engine.conversation import RunInputs, RunOutcome, crashed_run


def written(directory: RunDirectory, run_dir: Path, outcome: RunOutcome, inputs: RunInputs | None = None
            ) -> RunOutcome:
    """The outcome written in `run_dir`: `outcome`, or with `inputs` (the run's), the crashed run's that took
    its place when one of its records held no JSON (without them that `ValueError` is the caller's). The writes
    are here, not in a helper: every run writes once, and a call more a run shows in tests/engine/test_turn_calls."""
    folder = os.fspath(run_dir)  # joined as text: pathlib's `/` is some fifteen calls, twice a run
    try:
        directory.write_json(os.path.join(folder, "transcript.json"), outcome.transcript)
        directory.write_json(os.path.join(folder, "result.json"), outcome.result)
        if outcome.spans is not None:
            spans = outcome.spans.numbers_masked(directory.redactor.text)
            directory.write_json(os.path.join(folder, "spans.json"), spans)
    except ValueError as exc:
        if inputs is None:
            raise
        return written(directory, run_dir, crashed_run(inputs, exc))
    return outcome
