"""The voice benchmark: `python bench/voice.py` (part of `make bench`). Writes bench/results/voice-<date>.json
and refreshes the voice table in docs/performance.md.

- CPU per second of conversation audio for each stage: speech synthesis (Piper, and espeak-ng), pacing
  (wire conversion, base64, the event, 20 ms frames at wall-clock pace), VAD (Silero ONNX), transcription
  (Whisper tiny.en). Read with process_time (all threads of this process) or, for espeak-ng, the children's
  rusage. "x real time" is audio seconds per CPU second.
- The memory of one audio conversation with the models loaded: the peak RSS of `tamesu run` of one audio
  test (2 turns) against bench/realtime_server.py (a cheap agent in its own process), from wait4.
- Conversations at once: N audio conversations in one `tamesu run --parallel N` (1, 4, 8, 16); real-time
  pace is kept when every conversation passed, no turn was lost (a reply with no audio or no words) and in
  every conversation the p99 of its frames' lateness (the run's `frame_late_ms_p99`) is at most 20 ms. The
  loop's lag (`loop_lag_ms_p99`, a 10 ms timer) and the machine's load average say why when it is not, and
  the machine's own lateness beside it: a probe process (`--probe N`) that does nothing but wake N
  coroutines on the same absolute 20 ms slots while the run goes on, so what any process suffers on the
  machine at that moment is told from what tamesu adds. CPU is split between tamesu's process (the event
  loop), its speech workers (read from /proc while they live) and the agent. Measured on
  the realtime target and on the pipecat target (protobuf frames, RTVI) against bench/pipecat_server.py, a cheap
  bot of the same kind (the twilio and voice targets share the pipecat target's audio socket).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from run import Measured  # noqa: E402  (the figures of the main benchmark's wait4 helper)

SENTENCES = [
    "Hello, I would like to book a table for two on Friday evening.",
    "Could we have a table by the window, if there is one free?",
    "My name is Ana, and my phone number is five five five, one two three four.",
    "Yes, seven o'clock is perfect, thank you very much.",
    "One more thing: one of us is allergic to nuts, so please tell the kitchen.",
]
SUITE = """\
targets:
  bench: {{ type: realtime, url: "{url}", mode: audio }}
tests:
  - name: call
    target: bench
    repeat: {n}
    scenario: {{ script: [ {{ say: "Hello, I would like to book a table for two on Friday" }},
                          {{ say: "Yes please, seven is perfect" }} ] }}
"""

PIPECAT_SUITE = """\
targets:
  bench: {{ type: pipecat, url: "{url}", mode: audio, idle: 0.8s }}
tests:
  - name: call
    target: bench
    repeat: {n}
    scenario: {{ script: [ {{ say: "Hello, I would like to book a table for two on Friday" }},
                          {{ say: "Yes please, seven is perfect" }} ] }}
"""


def _cpu(work: Any, children: bool = False) -> float:
    """CPU seconds `work` took: this process's threads, or (espeak-ng) its finished children's."""
    who = resource.RUSAGE_CHILDREN
    before = time.process_time(), resource.getrusage(who)
    work()
    after = time.process_time(), resource.getrusage(who)
    if children:
        return after[1].ru_utime + after[1].ru_stime - before[1].ru_utime - before[1].ru_stime
    return after[0] - before[0]


def stages() -> dict[str, dict[str, float]]:
    import numpy as np

    from tamesu.audio import stt, tts, vad
    from tamesu.audio.clip import Clip
    from tamesu.audio.formats import AudioFormat, frames
    from tamesu.audio.pacing import Pacer

    # CPU is read in this process: the stages run here (in threads), not in the speech worker
    os.environ["TAMESU_SPEECH_WORKERS"] = "0"
    tts.preload()
    stt.model()
    clips: list[Clip] = []
    out: dict[str, dict[str, float]] = {}

    def piper() -> None:
        clips.extend(asyncio.run(tts.say(s))[0] for s in SENTENCES)

    cpu = _cpu(piper)
    audio_s = sum(c.duration_ms for c in clips) / 1000
    out["speech synthesis (Piper)"] = _ratio(cpu, audio_s)
    if tts.voices.find("espeak:en-us") is not None:
        spoken: list[Clip] = []

        def espeak() -> None:
            spoken.extend(asyncio.run(tts.say(s, "espeak:en-us"))[0] for s in SENTENCES)

        cpu = _cpu(espeak, children=True)
        out["speech synthesis (espeak-ng)"] = _ratio(cpu, sum(c.duration_ms for c in spoken) / 1000)
    speech = Clip(np.concatenate([c.at(16000).samples for c in clips]), 16000)
    fmt = AudioFormat("pcm16", 24000)

    def pace() -> None:
        async def send(frame: bytes) -> None:
            json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(frame).decode()})

        asyncio.run(Pacer().stream(frames(speech.wire(fmt), fmt), send))

    seconds = speech.duration_ms / 1000
    out["pacing (wire audio, events, 20 ms frames)"] = _ratio(_cpu(pace), seconds)
    out["VAD (Silero ONNX)"] = _ratio(_cpu(lambda: vad.segments(speech)), seconds)
    out["transcription (Whisper tiny.en)"] = _ratio(_cpu(lambda: [stt.transcribe(c) for c in clips]), audio_s)
    del os.environ["TAMESU_SPEECH_WORKERS"]
    return out


def _ratio(cpu: float, audio_s: float) -> dict[str, float]:
    return {"cpu_s": round(cpu, 4), "audio_s": round(audio_s, 3), "cpu_per_audio_s": round(cpu / audio_s, 4),
            "x_real_time": round(audio_s / cpu, 1) if cpu else float("inf")}


class Server:
    def __init__(self, script: str = "realtime_server.py") -> None:
        self.process = subprocess.Popen([sys.executable, str(ROOT / "bench" / script)],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"listening on (ws://\S+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"the bench server {script} did not start: {line}")
        self.url = match.group(1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float | None:
    """A process's CPU so far (user + system), from /proc; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def _children_of(pid: int) -> list[int]:
    """Every child of `pid`, whichever of its threads started it: Linux lists a child under the thread that
    forked it, and tamesu starts its speech workers from a thread of their own (`tamesu.audio.pool`), so the
    main thread's list alone found none (the workers' CPU read 0 and was counted as the loop's)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def probe(n: int) -> None:
    """`--probe N`: N coroutines wake on absolute 20 ms slots and note how late, until stdin closes; prints
    the p50/p99/max. It does nothing else, so its lateness is the machine's, not any program's."""
    from tamesu.audio.pacing import percentile

    lates: list[float] = []

    async def caller(stop: asyncio.Event) -> None:
        start = time.monotonic()
        k = 0
        while not stop.is_set():
            k += 1
            slot = start + k * 0.02
            if slot > time.monotonic():
                await asyncio.sleep(slot - time.monotonic())
            lates.append(max(0.0, (time.monotonic() - slot) * 1000))

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(sys.stdin.fileno(), stop.set)
        print("probing", flush=True)
        await asyncio.gather(*(caller(stop) for _ in range(n)))

    asyncio.run(main())
    print(json.dumps({"p50": round(percentile(lates, 50), 2), "p99": round(percentile(lates, 99), 2),
                      "max": round(max(lates, default=0.0), 2)}), flush=True)


class Probe:
    def __init__(self, n: int) -> None:
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--probe", str(n)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.process.stdout.readline()

    def stop(self) -> dict[str, float]:
        out, _ = self.process.communicate("", timeout=60)
        return json.loads(out.strip().splitlines()[-1])


def _run_watched(command: list[str], cwd: Path) -> tuple[Measured, float]:
    """`measure`'s figures (wait4: the run and every process it waited for), and the CPU of the run's
    speech workers, polled from /proc while they live (their last reading before they end)."""
    workers: dict[int, float] = {}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.1):
            for child in _children_of(process.pid):
                cpu = _cpu_of(child)
                if cpu is not None:
                    workers[child] = cpu

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    done.set()
    watcher.join()
    measured = Measured(usage.ru_utime + usage.ru_stime, time.perf_counter() - started, usage.ru_maxrss / 1024,
                        os.waitstatus_to_exitcode(status), output)
    return measured, sum(workers.values())


def conversations(url: str, n: int, suite: str = SUITE, agent: subprocess.Popen[str] | None = None) -> dict[str, Any]:
    """N conversations at once in one run: pass count, every frame's lateness (the runs' p50/p99/max, the
    worst of each), the loop's lag, turns lost (a reply never heard), the load average while it ran, the
    machine's own lateness (a probe beside it) and the CPU of tamesu's process, its workers and the agent."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        (path / "suite.yaml").write_text(suite.format(url=url, n=n), encoding="utf-8")
        load_before = os.getloadavg()[0]
        agent_before = _cpu_of(agent.pid) if agent is not None else None
        machine = Probe(n)
        try:
            done, workers_cpu = _run_watched([sys.executable, "-m", "tamesu", "run", "suite.yaml", "--out", "out",
                                              "--parallel", str(n)], cwd=path)
        finally:
            floor = machine.stop()
        agent_after = _cpu_of(agent.pid) if agent is not None else None
        audio: list[dict[str, Any]] = []
        passed = lost = turns = 0
        for result in (path / "out").glob("*/*/*/run-*/result.json"):
            data = json.loads(result.read_text())
            passed += data["status"] == "passed"
            audio += [e["data"] for e in data["events"] if e["name"] == "audio"]
            for turn in data["turns"]:
                if turn["user"] is None:
                    continue
                turns += 1
                record = turn["agent"].get("audio") or {}
                lost += not (record.get("agent_audio_ms") and (record.get("agent_said") or turn["agent"]["text"]))

    def worst(key: str) -> float | None:
        return max((a[key] for a in audio if key in a), default=None)

    p99 = worst("frame_late_ms_p99")
    return {"conversations": n, "passed": passed, "turns": turns, "turns_lost": lost,
            "frames_sent": sum(a.get("frames_sent", 0) for a in audio),
            "frame_late_ms_p50": worst("frame_late_ms_p50"), "frame_late_ms_p99": p99,
            "late_frame_ms_max": worst("frame_late_ms_max") or worst("late_frame_ms_max"),
            "loop_lag_ms_p99": worst("loop_lag_ms_p99"), "loop_lag_ms_max": worst("loop_lag_ms_max"),
            "loop_cpu_ms": worst("loop_cpu_ms"), "loop_runqueue_ms": worst("loop_runqueue_ms"),
            "transcribed_during_call": sum(a.get("transcribed_during_call", 0) for a in audio),
            "machine_late_ms_p50": floor["p50"], "machine_late_ms_p99": floor["p99"],
            "machine_late_ms_max": floor["max"], "cpu_loop_process_s": round(done.cpu_s - workers_cpu, 2),
            "cpu_speech_workers_s": round(workers_cpu, 2),
            "cpu_agent_s": round(agent_after - agent_before, 2) if agent_before is not None and agent_after is not None
            else None,
            "peak_rss_mib": round(done.peak_rss_mib, 1), "cpu_s": round(done.cpu_s, 2),
            "wall_s": round(done.wall_s, 2), "load": round((load_before + os.getloadavg()[0]) / 2, 1),
            "real_time": passed == n and lost == 0 and p99 is not None and p99 <= 20.0}


GOAL_AT_ONCE = 16


def _at_once(what: str, many: list[dict[str, Any]]) -> str:
    held = [m["conversations"] for m in many if m["real_time"]]
    best = max(held, default=0)
    return (f"| audio conversations at once, every frame's p99 <= 20 ms late, none lost, {what} | {best} | "
            f">= {GOAL_AT_ONCE} | {'yes' if best >= GOAL_AT_ONCE else 'no'} |")


def at_once_table(runs: dict[str, list[dict[str, Any]]]) -> str:
    rows = ["| target | at once | passed | turns lost | frame late p50 / p99 / max | the machine's lateness (idle "
            "probe) p50 / p99 / max | loop lag p99 / max | loop thread running / waiting for a core (the longest "
            "call) | transcribed during the calls | CPU: tamesu's process / "
            "speech workers / agent | wall | peak RSS (the larger of tamesu and its speech worker) | load average |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for what, many in runs.items():
        for m in many:
            rows.append(f"| {what} | {m['conversations']} | {m['passed']} | {m['turns_lost']} of {m['turns']} | "
                        f"{m['frame_late_ms_p50']} / {m['frame_late_ms_p99']} / {m['late_frame_ms_max']} ms | "
                        f"{m.get('machine_late_ms_p50')} / {m.get('machine_late_ms_p99')} / "
                        f"{m.get('machine_late_ms_max')} ms | "
                        f"{m['loop_lag_ms_p99']} / {m['loop_lag_ms_max']} ms | "
                        f"{m.get('loop_cpu_ms')} / {m.get('loop_runqueue_ms')} ms | {m['transcribed_during_call']} | "
                        f"{m.get('cpu_loop_process_s')} / {m.get('cpu_speech_workers_s')} / {m.get('cpu_agent_s')} s "
                        f"| {m['wall_s']} s | {m['peak_rss_mib']} MiB | {m['load']} |")
    return "\n".join(rows)


def table(stage: dict[str, dict[str, float]], one: dict[str, Any], many: list[dict[str, Any]],
          pipecat: list[dict[str, Any]]) -> str:
    rows = ["| figure | value | goal | met |", "| --- | --- | --- | --- |"]
    for name, figures in stage.items():
        goal, met = ("", "")
        if name.startswith("transcription"):
            goal, met = ">= 5x real time", "yes" if figures["x_real_time"] >= 5 else "no"
        rows.append(f"| CPU per audio second, {name} | {figures['cpu_per_audio_s'] * 1000:.1f} ms "
                    f"({figures['x_real_time']}x real time) | {goal} | {met} |")
    rows.append(f"| memory of one audio conversation, models loaded | {one['peak_rss_mib']} MiB | < 600 MB "
                f"| {'yes' if one['peak_rss_mib'] * 1.048576 < 600 else 'no'} |")
    rows.append(_at_once("realtime", many))
    if pipecat:
        rows.append(_at_once("pipecat", pipecat))
    return "\n".join(rows) + "\n\n" + at_once_table({"realtime": many, **({"pipecat": pipecat} if pipecat else {})})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="1,4,8,16", help="conversations at once to try")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--only", choices=["realtime", "pipecat"], help="the conversations at once of one target "
                        "(and no stages): prints the figures, writes nothing")
    parser.add_argument("--probe", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(args.probe)
        return
    counts = [int(n) for n in args.counts.split(",")]
    if args.only:
        server = Server("realtime_server.py" if args.only == "realtime" else "pipecat_server.py")
        try:
            runs = [conversations(server.url, n, SUITE if args.only == "realtime" else PIPECAT_SUITE, server.process)
                    for n in counts]
        finally:
            server.stop()
        print(json.dumps(runs, indent=2))
        print(at_once_table({args.only: runs}))
        return
    stage = stages()
    server = Server()
    try:
        one = conversations(server.url, 1, agent=server.process)
        many = [conversations(server.url, n, agent=server.process) for n in counts]
    finally:
        server.stop()
    server = Server("pipecat_server.py")
    try:
        pipecat = [conversations(server.url, n, PIPECAT_SUITE, server.process) for n in counts]
    finally:
        server.stop()
    load = os.getloadavg()[0]
    text = (f"Measured {dt.date.today()} on {os.cpu_count()} cores, {platform.system().lower()} with "
            f"`python bench/voice.py` (load average {load:.1f} when it ended: the machine is shared).\n\n"
            + table(stage, one, many, pipecat))
    print(text)
    if args.no_write:
        return
    results = ROOT / "bench" / "results" / f"voice-{dt.date.today()}.json"
    results.write_text(json.dumps({"stages": stage, "one": one, "at_once": many, "pipecat_at_once": pipecat,
                                   "load": load}, indent=2) + "\n")
    doc = ROOT / "docs" / "performance.md"
    content = doc.read_text()
    block = f"<!-- voice-bench:start -->\n{text}\n<!-- voice-bench:end -->"
    if "<!-- voice-bench:start -->" in content:
        content = re.sub(r"<!-- voice-bench:start -->.*<!-- voice-bench:end -->", lambda _m: block, content,
                         flags=re.S)
    else:
        content += "\n" + block + "\n"
    doc.write_text(content)


if __name__ == "__main__":
    from _owned import own_children

    own_children()
    main()
