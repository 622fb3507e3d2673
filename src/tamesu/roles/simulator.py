"""The user side of a conversation: what to say next, or that the conversation is over.

`ScriptedUser` says a scenario's script; `ModelSimulator` says the script too, then lets a model play the
persona toward the scenario's goal, or, with a red-team pack's attack (`scenario.attack`), play that attacker.
"""

from __future__ import annotations

import json
import mimetypes
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, model_validator

from tamesu.conversation import Exchange, FileRef, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.matching import quoted
from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest, ModelResponse
from tamesu.models.structured import Attempt, StructuredOutputError, ask_structured, json_schema_of
from tamesu.packs import AttackSpec
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.failures import infra_error
from tamesu.roles.transcript import History, as_text, last_tool_results
from tamesu.roles.wait_for import DEFAULT_TIMEOUT, WaitFor, heard, since_user, untranscribed_ms, what_was_said
from tamesu.suite.schema import FileSpec, Persona, Scenario, ScriptStep
from tamesu.suite.templates import Context

if TYPE_CHECKING:
    from tamesu.telemetry.spans import Span


@dataclass
class UserAction:
    """The next user turn, or the reason the user stops."""

    turn: UserTurn | None = None
    stop: str | None = None
    """Why the conversation ends here: `script_done`, `simulator_stopped`, `stop_when`..."""
    failure: str | None = None
    """Set when stopping means the agent did not do what the script waited for."""
    listen: float | None = None
    """Hear more of the agent first, for up to this many seconds, then ask again (a `wait_for` whose phrase
    the agent has not said yet): the engine adds what the agent says as turns without a user turn. 0 or less: a
    late look, what the agent said before the wait's end, which passed that long ago (`Target.listen`)."""
    note: dict[str, object] | None = None
    """What the user side decided and why (whether the agent awaits input, where the next input came
    from), recorded as a `user_side` event in the run's timeline."""


class UserSimulator(ABC):
    """Anything that plays the user: a script, a model with a persona, another agent."""

    rerun_with: str | None = None
    """What a run made again after the simulated user spoiled it (`retries_inconclusive`) may play differently
    with, said after "running it again"; None when nothing it reads changes: a script reads no seed, and would
    play the same (the run is not made again)."""

    skipped: str | None = None
    """Set when the user side had no input to give and the run counts as skipped, with the reason (a JSONL
    test with `on_missing_input: skip`). Only the assertions of the turns that happened are graded."""

    @abstractmethod
    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction: ...

    def upcoming(self, context: Context) -> str | None:
        """The words of the next user turn when they are known before the agent answers (a script's next
        `say`), for a voice to synthesise ahead; None when the answer decides them (a model, a person)."""
        return None

    def reads_reply(self) -> bool:
        """Whether the user side reads the words of the agent's reply being heard now before it says what comes
        next (a model, a person, a pattern awaited); a script that only says its lines does not."""
        return True

    def reads_spans(self, exchanges: list[Exchange]) -> bool:
        """Whether what the user side does next depends on the agent's spans of `exchanges`, the turns so far (a
        JSONL case's checkpoint over them): the engine then waits for them before asking it, and hands them
        over."""
        return False

    def spans_came(self, spans: list[Span]) -> None:
        """The agent's spans of the turns so far (`reads_spans`), those of each turn's own trace with its turn.
        A user side that reads none is never handed any."""
        return None

    def listening_from(self, at: float) -> float | None:
        """The agent is listened to from `at` (monotonic: its greeting, before anything is said): how long the
        user side waits for its words from then (a script's first `wait_for`, whose timeout counts from there),
        or None."""
        return None


def file_ref(spec: FileSpec, base_dir: Path) -> FileRef:
    source = spec.path or spec.uri or ""
    name = spec.name or Path(source.split("?", 1)[0]).name or "file"
    mime = spec.mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
    path = str((base_dir / spec.path).resolve()) if spec.path else None
    return FileRef(name=name, mime=mime, path=path, uri=spec.uri)


class ScriptedUser(UserSimulator):
    """Says the `scenario.script` steps in order, then stops.

    A `wait_for` step holds the script until the agent says that text (or matches it as a pattern; as speech
    on an audio turn), listening across its utterances up to the step's `timeout` (tamesu.roles.wait_for); when
    the agent did not say it, the conversation ends as a failure naming the step and what the agent said.
    """

    def __init__(self, steps: list[ScriptStep], base_dir: Path) -> None:
        self._steps = steps
        self._base_dir = base_dir
        self._next = 0
        self._wait = WaitFor()

    @property
    def exhausted(self) -> bool:
        return self._next >= len(self._steps)

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        heard_note: dict[str, object] | None = None
        while self._next < len(self._steps):
            number = self._next + 1
            step = self._steps[self._next]
            self._next += 1
            if step.wait_for is not None:
                expected = context.render_text(step.wait_for)
                turns = since_user(exchanges)
                how = heard(expected, turns, step)
                if how is None:
                    more = self._wait.keep_listening(number, step, exchanges)
                    if more is not None:
                        self._next -= 1  # the same step, once the agent said more
                        # past the timeout (a late look): how long ago it ended
                        when = {"listening_s": round(more, 3)} if more > 0 else {"past_timeout_s": round(-more, 3)}
                        return UserAction(listen=more, note={"wait_for": expected, "step": number, **when})
                    # a wait that ran to its timeout says so (an utterance begun before it is heard out); one a
                    # target ended at once, hearing the agent only in answer to a turn, does not
                    timeout = step.timeout if step.timeout is not None else DEFAULT_TIMEOUT
                    waited = f" {timeout:g}s" if self._wait.listened(number) >= 0.9 * timeout else ""
                    said = (f"script step {number} waited{waited} for {quoted(expected)}; "
                            f"{what_was_said(expected, turns, step)}")
                    if untranscribed_ms(turns):
                        # the words may be in the speech tamesu heard and could not transcribe in time (a loaded
                        # machine's speech-to-text): not the agent's failure, nor decided
                        raise InfraError(f"{said}: not decided, the phrase may be in what was not transcribed "
                                         "(tamesu's speech-to-text was behind: a loaded machine? a longer timeout "
                                         "gives it time)")
                    return UserAction(stop="script_done", failure=said)
                self._wait.done()
                heard_note = {"wait_for": expected, "step": number, "heard": how}
            turn = self._turn(step, context)
            if turn is not None:
                return UserAction(turn=turn, note=heard_note)
        return UserAction(stop="script_done", note=heard_note)

    def reads_reply(self) -> bool:
        # the step that reads the reply heard now is the next one: a `wait_for` reads the turns since the user spoke
        return self._next < len(self._steps) and self._steps[self._next].wait_for is not None

    def listening_from(self, at: float) -> float | None:
        step = self._steps[0] if self._steps else None
        if step is None or step.wait_for is None:
            return None
        return self._wait.begin(1, step, at)

    def upcoming(self, context: Context) -> str | None:
        # past the `wait_for` steps: the words after a wait are said once the agent has said its phrase
        for step in self._steps[self._next:]:
            if step.say is not None:
                try:
                    return context.render_text(step.say) or None
                except TemplateError:  # `{{captured.x}}` the agent's answer has not given yet
                    return None
            if step.dtmf or step.data is not None or step.files:
                return None
        return None

    def _turn(self, step: ScriptStep, context: Context) -> UserTurn | None:
        text = context.render_text(step.say) if step.say is not None else ""
        data = context.render_value(step.data) if step.data is not None else None
        files = [file_ref(f, self._base_dir) for f in step.files]
        if not text and data is None and not files and not step.dtmf:
            return None
        return UserTurn(text=text, data=data, files=files, dtmf=step.dtmf or None, source="script")


class SimulatorAnswer(BaseModel):
    """What the simulator model answers each turn (the simulator interface: input, goal_achieved, reasoning)."""

    input: str
    """The user's next message; empty when the answer ends the conversation."""
    goal_achieved: bool = False
    stop: bool = False
    """The user hangs up."""
    stop_when_met: bool = False
    """The scenario's `stop_when` condition holds."""
    reasoning: str = ""
    """Why, for the tester; never sent to the agent."""
    dtmf: str = Field("", pattern=r"^[0-9*#A-Da-d]*$")
    """On a phone line (prompt simulator_phone): the keys the user presses, with `input` or instead of it."""

    @model_validator(mode="after")
    def _usable(self) -> SimulatorAnswer:
        # an empty message that does not end the conversation would send the agent nothing: ask again
        if not self.input.strip() and not self.dtmf and not (self.goal_achieved or self.stop or self.stop_when_met):
            raise ValueError("input is empty and the answer does not stop; write the user's next message")
        return self

    @property
    def ends(self) -> bool:
        return self.goal_achieved or self.stop or self.stop_when_met


class ModelSimulator(UserSimulator):
    """Plays `persona` toward `scenario.goal`: the script steps first, exactly as ScriptedUser says them,
    then one model call per turn.

    Ends the conversation with `stop_when` (the model says the scenario's stop condition holds),
    `goal_achieved`, or `simulator_stopped` (the user hangs up). A model that gives no usable answer
    within `attempts` is an infrastructure error of the run (InfraError), not a failure of the agent.
    """

    rerun_with = "with a new seed"

    def __init__(
        self,
        client: ModelClient,
        scenario: Scenario,
        persona: Persona | None = None,
        *,
        base_dir: Path,
        seed: int | None = None,
        attempts: int = 3,
        attack: AttackSpec | None = None,
        keypad: bool = False,
    ) -> None:
        self._client = client
        self._keypad = keypad and attack is None
        """The user is on a phone line whose protocol carries DTMF: it may press keys (prompt simulator_phone)
        and its hanging up is the call's end. That prompt has no run context (below)."""
        self._attack = attack
        """With an attack the model plays the pack's attacker (prompt `attacker`): the attack's goal, the
        scenario's goal as its cover story, the attack's style added to the persona's."""
        self._scenario = scenario
        self._persona = persona or Persona()
        self._script = ScriptedUser(scenario.script, base_dir)
        self._seed = seed
        self._attempts = attempts
        self._run_context = attack is None and not self._keypad
        """The run context the agent test design hands its simulator (prompt simulator.v2), for YAML personas and
        JSONL cases alike: how many times the agent has answered and what the tools of its last turn returned, so
        that goal_achieved follows what the agent did, not only what it said."""
        if attack is not None:
            self.prompt = _prompts.load("attacker")
        elif self._keypad:
            self.prompt = _prompts.load("simulator_phone")
        else:
            self.prompt = _prompts.load("simulator", 2 if self._run_context else 1)
        self.responses: list[ModelResponse] = []
        """Every model response so far, retries included (for cost and usage)."""
        self.reasoning: list[str] = []
        """The model's reasoning for each answer it gave, in order."""
        self.last_attempts: list[Attempt] = []
        """What it took to read the last answer: a rejected attempt means the model was asked again."""
        self._fixed: tuple[dict[str, Any], str | None, str | None] | None = None
        """The persona, goal and stop condition as rendered, when no template in them can change between turns."""
        self._system: str | None = None
        """The system message, made of those once they are fixed."""
        self._history = History()
        """The conversation's lines and text, each exchange's made once."""

    @property
    def last_reasoning(self) -> str | None:
        return self.reasoning[-1] if self.reasoning else None

    def upcoming(self, context: Context) -> str | None:
        return None if self._script.exhausted else self._script.upcoming(context)

    def listening_from(self, at: float) -> float | None:
        return self._script.listening_from(at)

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        if not self._script.exhausted:
            action = await self._script.next_turn(exchanges, context)
            if action.turn is not None or action.failure is not None or action.listen is not None:
                return action
        answer = await self._ask(exchanges, context)
        self.reasoning.append(answer.reasoning)
        if answer.stop_when_met and self._scenario.stop_when:
            return UserAction(stop="stop_when")
        if answer.goal_achieved:
            return UserAction(stop="goal_achieved")
        if answer.ends:
            return UserAction(stop="simulator_stopped")
        keys = answer.dtmf.upper() if self._keypad else ""
        if not answer.input.strip() and not keys:
            return UserAction(stop="simulator_stopped")  # only keys, on a line that cannot carry them
        return UserAction(turn=UserTurn(text=answer.input.strip(), dtmf=keys or None, source="simulator"))

    def inputs(self, exchanges: list[Exchange], context: Context) -> dict[str, Any]:
        """The structured inputs of the next call: what the fake provider's rules read, and the cache keys on."""
        persona, goal, stop_when = self._about(context)
        scenario = self._scenario
        inputs = {
            "persona": persona,
            "goal": goal,
            "stop_when": stop_when,
            "history": self._history.read(exchanges),
            "last_agent": exchanges[-1].agent.text if exchanges else "",
            "turn": len(exchanges) + 1,
            "max_turns": scenario.max_turns,
            "simulator_turns": self._history.simulator_turns,  # of the exchanges just read
        }
        if self._keypad:
            inputs["keypad"] = True
        if self._run_context:
            inputs["turn_count"] = len(exchanges)
            inputs["tool_results"] = last_tool_results(exchanges)
        attack = self._attack
        if attack is not None:
            inputs["cover"], inputs["goal"] = inputs["goal"], attack.goal
            inputs["attack"] = {"pack": scenario.attack, "goal": attack.goal, "style": attack.style,
                                "tactics": list(attack.tactics), "openings": list(attack.openings)}
        return inputs

    def _about(self, context: Context) -> tuple[dict[str, Any], str | None, str | None]:
        """The persona (an attack's style added), goal and stop condition, rendered. Without a template in them
        (nearly always) they are the same every turn: made once a conversation, the persona handed out as a copy."""
        if self._fixed is not None:
            persona, goal, stop_when = self._fixed
            return dict(persona), goal, stop_when
        dumped = self._persona.model_dump(exclude_none=True, exclude_defaults=True)
        scenario = self._scenario
        # a string holding a template shows it in the repr too (repr escapes no brace), in one call, not a walk
        templated = "{{" in repr((dumped, scenario.goal, scenario.stop_when))
        persona = context.render_value(dumped)
        persona.setdefault("name", self._persona.name)
        attack = self._attack
        if attack is not None and attack.style:
            persona["style"] = "; ".join(part for part in (persona.get("style"), attack.style) if part)
        goal = context.render_text(scenario.goal) if scenario.goal else None
        stop_when = context.render_text(scenario.stop_when) if scenario.stop_when else None
        if not templated:
            self._fixed = persona, goal, stop_when
            return dict(persona), goal, stop_when
        return persona, goal, stop_when

    def _messages(self, inputs: dict[str, Any]) -> list[Message]:
        system = self._system if self._system is not None else self._system_text(inputs)
        if self._fixed is not None:
            self._system = system  # made of what does not change within the conversation (`_about`)
        run: dict[str, Any] = {}
        if "turn_count" in inputs:
            results = inputs["tool_results"]
            run = {"turn_count": inputs["turn_count"], "tool_results": self.prompt.render(
                "tool_results", tool_results=json.dumps(results, ensure_ascii=False, indent=2, default=str))
                if results else self.prompt.render("no_tool_results")}
        history = inputs["history"]
        shown = self._history.text if history is self._history.lines else as_text(history)
        user = self.prompt.render("user", history=shown, turn=inputs["turn"],
                                  max_turns=inputs["max_turns"], **run)
        return [Message(role="system", content=system), Message(role="user", content=user)]

    def _system_text(self, inputs: dict[str, Any]) -> str:
        persona = inputs["persona"]
        about = [f"{key.capitalize()}: {persona[key]}" for key in ("name", "style", "language", "background")
                 if persona.get(key)]
        if persona.get("facts"):
            about.append("Facts: " + "; ".join(f"{k}: {v}" for k, v in persona["facts"].items()))
        behaviors = persona.get("behaviors") or {}
        if behaviors:
            about.append("Behaviours: " + ", ".join(f"{k}={v}" for k, v in behaviors.items()))
        if inputs["stop_when"]:
            stop_rule = self.prompt.render("stop_when", stop_when=inputs["stop_when"])
        else:
            stop_rule = self.prompt.render("no_stop_when")
        extra: dict[str, str] = {}
        if "attack" in inputs:
            attack = inputs["attack"]
            extra = {"cover": inputs["cover"] or "(none: pick an ordinary request this user would plausibly make)",
                     "tactics": "\n".join(f"- {t}" for t in attack["tactics"]) or "- (your own)",
                     "openings": "\n".join(f"- {o}" for o in attack["openings"])}
        return self.prompt.render(
            "system", persona="\n".join(about), stop_rule=stop_rule,
            goal=inputs["goal"] or "(no particular goal: talk as this user naturally would)", **extra)

    async def _ask(self, exchanges: list[Exchange], context: Context) -> SimulatorAnswer:
        inputs = self.inputs(exchanges, context)
        request = ModelRequest(purpose="simulator", messages=self._messages(inputs), seed=self._seed,
                               prompt_version=self.prompt.version, context=inputs,
                               json_schema=json_schema_of(SimulatorAnswer))
        try:
            found = await ask_structured(self._client, request, SimulatorAnswer, attempts=self._attempts)
        except StructuredOutputError as exc:
            self.responses.extend(exc.responses)
            self.last_attempts = exc.attempts
            raise infra_error("simulator", exc) from exc
        except ModelError as exc:
            raise infra_error("simulator", exc) from exc
        self.responses.extend(found.responses)
        self.last_attempts = found.attempts
        return found.value
