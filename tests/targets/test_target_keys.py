"""A target type's keys come from its own spec model (no hand-kept list), so `validate` names the type a stray
key belongs to: a built type, or one not built yet (a small declared list until it lands)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hidden_modules import hiding
from tamesu import plugins, targets
from tamesu.plan import load_plan
from tamesu.targets.a2a import A2ASpec

ROOT = Path(__file__).resolve().parents[2]


def test_keys_are_the_spec_models_fields() -> None:
    assert targets.keys_of("a2a") == frozenset(A2ASpec.model_fields) | {
        f.alias for f in A2ASpec.model_fields.values() if f.alias}
    assert {"allow_tools", "command", "system"} <= targets.keys_of("mcp")  # mcp's own and the model's it extends
    assert targets.foreign_key_owner("rest", "skill") == "a2a"
    assert targets.foreign_key_owner("rest", "viewport") == "browser"  # from the browser target's spec model
    assert targets.foreign_key_owner("rest", "sample_rate") == "pipecat"  # from the pipecat target's spec model
    assert targets.foreign_key_owner("rest", "url") is None  # rest's own
    assert targets.foreign_key_owner("rest", "no_such_key") is None
    # every type that takes it: naming the first alone sent a reader of a realtime `mode` to grpc
    assert targets.foreign_key_owner("rest", "mode") == "grpc, livekit, pipecat and realtime"
    assert targets.foreign_key_owner("realtime", "skill") == "a2a"


def test_validate_warns_about_a_key_of_another_type(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          api: { type: rest, url: "http://127.0.0.1:9/chat", sample_rate: 16000 }
        tests:
          - name: a
            target: api
            scenario: { script: [ { say: hi } ] }
        """))
    plan = load_plan([tmp_path / "suite.yaml"], require_secrets=False)
    assert [str(w).split(": ", 1)[1] for w in plan.warnings] == [
        "targets.api.sample_rate: 'sample_rate' is a key of pipecat targets, not rest; ignored"]


# `tamesu ARGS` as `python -m tamesu` runs it; then, in the same interpreter once the command is done (so it ran
# undisturbed), the built-in target types whose spec cannot be read here, written to PASSED_OVER. One fresh
# interpreter for both (hiding a module needs one: the warm process's fork execs one), not two: 0.9 s of CPU less
VALIDATE_THEN_PROBE = """\
import os, runpy, sys
sys.argv[0] = "tamesu"
try:
    runpy.run_module("tamesu", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exc:
    code = exc.code
from tamesu import plugins, targets
passed_over = []
for kind in plugins.built_in_names("targets"):
    try:
        targets.keys_of(kind)
    except ImportError:
        passed_over.append(kind)
with open(os.environ["PASSED_OVER"], "w") as out:
    out.write(" ".join(passed_over))
# the phone-like types import numpy only as they hear: their specs must name the missing extra themselves
said = {}
for kind, fields in (("livekit", {"mode": "text"}), ("livekit", {"mode": "audio"}), ("sip", {})):
    spec = {"type": kind, **({"url": "ws://127.0.0.1:9", "api_key": "k", "api_secret": "s", **fields}
                             if kind == "livekit" else {"to": "sip:agent@127.0.0.1"})}
    try:
        targets.target_class(kind).Spec.model_validate(spec)
        said[kind + str(fields)] = "valid"
    except ValueError as exc:
        said[kind + str(fields)] = str(exc)
with open(os.environ["PASSED_OVER"] + ".said", "w") as out:
    out.write(repr(said))
sys.exit(code)
"""


def test_a_stray_key_without_the_voice_extra_is_still_one_line(tmp_path: Path) -> None:
    """Finding the owner of a stray key reads every type's spec; a type whose module cannot be imported here
    (an extra not installed, a broken install) is passed over, never a crash. No built-in type before pipecat
    needs an extra to be imported any more (livekit and sip import the speech-to-text, numpy, as they hear),
    so the grpc type's own module stands for one that cannot; numpy stays hidden too: a rest suite's
    `validate` needs none of the voice extra."""
    hide = hiding(tmp_path, "numpy", "tamesu.targets.grpc_turn")
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          api: { type: rest, url: "http://127.0.0.1:9/chat", skill: x, sample_rate: 8000 }
        tests:
          - name: a
            target: api
            scenario: { script: [ { say: hi } ] }
        """))
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PASSED_OVER": str(tmp_path / "passed-over"),
           "PYTHONPATH": os.pathsep.join([str(hide), str(ROOT / "src")])}
    env.pop("TAMESU_DEBUG", None)
    done = subprocess.run([sys.executable, "-c", VALIDATE_THEN_PROBE, "validate", "suite.yaml"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    # the scan for sample_rate's owner must pass a type it cannot import in that environment, or this test
    # would pass just as well with nothing hidden (it failed, exit 3, with the `except ImportError` taken out)
    probed = (tmp_path / "passed-over").read_text().split()
    order = plugins.built_in_names("targets")
    passed_over = [kind for kind in probed if order.index(kind) < order.index("pipecat")]
    assert passed_over == ["grpc"], f"the types before pipecat passed over: {probed}"
    said = ast.literal_eval((tmp_path / "passed-over.said").read_text())
    assert said["livekit{'mode': 'text'}"] == "valid"  # text mode needs no voice extra
    for what in ("livekit{'mode': 'audio'}", "sip{}"):  # a one-line problem up front, not a crash mid-call
        assert "audio needs the voice extra: pip install 'tamesu[voice]' (missing: numpy)" in said[what], said
    assert done.returncode == 0, done.stderr
    assert [line.split(": ", 2)[2] for line in done.stderr.splitlines()] == [
        "targets.api.skill: 'skill' is a key of a2a targets, not rest; ignored",
        "targets.api.sample_rate: 'sample_rate' is a key of pipecat targets, not rest; ignored"]
