"""The user side of a JSONL case, plugged into the engine's conversation loop as a `UserSimulator`.

- standard: one turn carrying the history; the conversation ends after the agent's answer.
- multi_turn: the static turns in order (always said: the test wrote them). When they run out and the agent
  awaits input (`tamesu.roles.awaiting`), the next input comes from the simulator, then a person
  (`--interactive`), and otherwise `on_missing_input` decides: `skip` (the run is skipped), `fail`, `end`.
  An agent that no longer awaits input ends the conversation. More than `max_turns` turns fail.
- dynamic: the first input (`input`, else the simulator), then the simulator, until every required
  checkpoint is reached (passed), the simulator ends or `max_turns` passes (the checkpoints missing fail).
Every decision is recorded as a `user_side` event with the awaiting-input verdict and its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tamesu.conversation import Exchange, UserTurn
from tamesu.errors import InfraError, SuiteProblem
from tamesu.matching import quoted
from tamesu.models.base import ModelError, Models
from tamesu.roles.awaiting import Awaiting, detect
from tamesu.roles.human import Human
from tamesu.roles.scripted_users import HelperAgent, ScriptSimulator, TargetSimulator
from tamesu.roles.simulator import ModelSimulator, UserAction, UserSimulator
from tamesu.suite.schema import Persona, Scenario
from tamesu.suite.templates import Context

if TYPE_CHECKING:
    from tamesu.telemetry.spans import Span

Mode = Literal["standard", "multi_turn", "dynamic"]
MissingInput = Literal["skip", "fail", "end"]


@dataclass
class SimulatorRef:
    """Who plays the user: a model (`name` under `models:`, None for `models.simulator`), a script, or a target
    of tamesu.yaml (`helper`)."""

    kind: Literal["model", "script", "target"]
    name: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    function: Callable[..., Any] | None = None
    helper: HelperAgent | None = None
    connector: str | None = None
    """`simulator.options.connector`: the model a model simulator or a target simulator answers with."""
    options: dict[str, Any] = field(default_factory=dict)
    """`simulator.options` as written, for a script."""

    @property
    def shown(self) -> str:
        return self.name or self.connector or "simulator"


class Checkpoints(Protocol):
    """Dynamic mode's checkpoints as the user side asks after them (`tamesu.checks.checkpoint.Tracker`)."""

    @property
    def done(self) -> bool: ...
    def missing(self) -> list[str]: ...
    def reads_spans(self, exchanges: list[Exchange]) -> bool: ...
    def may_yet_be_reached(self, exchanges: list[Exchange]) -> bool: ...
    async def after_turns(self, exchanges: list[Exchange], context: Context, base_dir: Path,
                          models: Models | None, spans: list[Span] | None = None) -> None: ...


def last_sentence(text: str) -> str:
    """The question an agent asked: its last sentence (the whole text when it is one)."""
    parts = [p for p in text.replace("\n", " ").split(". ") if p.strip()]
    return parts[-1].strip() if parts else text.strip()


@dataclass
class Missing:
    """The agent awaited input that nobody could give."""

    after_turn: int
    question: str
    hint: str | None
    policy: MissingInput
    person: str | None = None
    """A person was asked (`--interactive`) and gave nothing: why (`no reply within 5s`, `stdin ended`)."""


@dataclass
class Interaction:
    human: Human | None
    timeout: float


class CaseUser(UserSimulator):
    def __init__(self, case_id: str, mode: Mode, static: list[UserTurn], simulator: SimulatorRef | None, *,
                 base_dir: Path, models: Models | None, seed: int, options: Mapping[str, object], max_turns: int,
                 on_missing_input: MissingInput, interaction: Interaction, tracker: Checkpoints | None) -> None:
        self.case_id = case_id
        self.mode = mode
        self.base_dir = base_dir
        self.models = models
        self.max_turns = max_turns
        self.on_missing_input = on_missing_input
        self.interaction = interaction
        self.tracker = tracker
        self.awaiting: dict[int, Awaiting] = {}
        """The verdict after each agent turn (multi-turn), by turn number."""
        self.missing: Missing | None = None
        self.goal_note: str | None = None
        """The simulator's reasoning when it said its goal was achieved."""
        self.simulator_error: str | None = None
        self.max_turns_failure: str | None = None
        """`max turns (N) exceeded`, held back when only checkpoints over the agent's spans were missing then: the
        record says it if grading, with every span come, still finds them missing."""
        """Why the simulator could not give the next input (it raised), for the design's error classes."""
        self._options = options
        self._static = static
        self._said = 0
        self._simulator = self._make_simulator(simulator, seed)
        self._spans: list[Span] | None = None
        """The agent's spans of the turns so far, when a checkpoint reads them (`spans_came`)."""
        self.rerun_with = self._simulator.rerun_with if self._simulator is not None else None
        self._reasoning: str | None = None

    def reads_spans(self, exchanges: list[Exchange]) -> bool:
        return self.mode == "dynamic" and self.tracker is not None and self.tracker.reads_spans(exchanges)

    def spans_came(self, spans: list[Span]) -> None:
        self._spans = spans

    def _make_simulator(self, ref: SimulatorRef | None, seed: int) -> UserSimulator | None:
        if ref is None:
            return None
        settings = ref.settings
        if ref.kind == "script":
            assert ref.function is not None
            return ScriptSimulator(ref.function, ref.shown, settings, self.max_turns, self.case_id, ref.options)
        if ref.kind == "target":
            assert ref.helper is not None
            return TargetSimulator(ref.helper, settings, self.max_turns, self.models, self.case_id, ref.connector)
        if self.models is None:
            raise InfraError("the simulator needs a model: configure models in tamesu.yaml")
        persona = settings.get("persona")
        if isinstance(persona, dict):
            persona = Persona.model_validate({k: v for k, v in persona.items() if k in Persona.model_fields})
        else:
            persona = Persona(background=str(persona)) if persona else None
        scenario = Scenario(goal=settings.get("goal"), stop_when=settings.get("stop_when"),
                            max_turns=self.max_turns)
        return ModelSimulator(self.models.client("simulator", ref.connector or ref.name), scenario, persona,
                              base_dir=self.base_dir, seed=seed)

    # -- the next turn ----------------------------------------------------------------------------------

    def upcoming(self, context: Context) -> str | None:
        # a multi-turn case's static turns come in order; a dynamic case's and the simulator's are decided later
        if self.mode == "multi_turn" and self._said < len(self._static):
            return self._static[self._said].text or None
        return None

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        mode = self.mode
        if not exchanges and not self._static and mode != "dynamic":
            # only loaded this way for the design's error classes (`--yao-errors`): tamesu refuses it at load.
            # Said in the design's words, but the case's to fix, not the agent's failure: it was never asked
            raise SuiteProblem("no initial input")
        if mode == "standard":
            return self._say_static() if not exchanges else UserAction(stop="script_done")
        if mode == "dynamic":
            return await self._dynamic(exchanges, context)
        return await self._multi_turn(exchanges, context)

    async def _multi_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        turn = len(exchanges)
        if turn == 0:
            return self._say_static()
        awaiting = self.awaiting[turn] = detect(exchanges[-1].agent)
        note = {"after_turn": turn, "awaiting_input": awaiting.awaiting, "reason": awaiting.reason,
                "input_hint": awaiting.hint}
        more_static = self._said < len(self._static)
        if not more_static and not awaiting.awaiting:
            return UserAction(stop="agent_done", note={**note, "next": "end"})
        if turn >= self.max_turns:
            return UserAction(stop="max_turns", failure=f"max turns ({self.max_turns}) exceeded",
                              note={**note, "next": "end"})
        if more_static:
            return self._noted(self._say_static(), note, "static")
        if self._simulator is not None:
            action = await self._simulate(exchanges, context)
            return self._noted(action, note, "simulator" if action.turn else "end")
        if self.interaction.human is not None:
            reply = await self.interaction.human.ask(self.case_id, turn, exchanges[-1].agent.text, awaiting.hint,
                                                     self.interaction.timeout)
            if reply:
                return UserAction(turn=UserTurn(text=reply, options=self._options, source="human"),
                                  note={**note, "next": "human"})
            person = self.interaction.human.silence or "no reply"
            return self._missing_input(turn, exchanges[-1].agent.text, awaiting, {**note, "person": person}, person)
        return self._missing_input(turn, exchanges[-1].agent.text, awaiting, note)

    async def _dynamic(self, exchanges: list[Exchange], context: Context) -> UserAction:
        assert self.tracker is not None
        turn = len(exchanges)
        await self.tracker.after_turns(exchanges, context, self.base_dir, self.models, self._spans)
        note = {"after_turn": turn, "checkpoints_missing": self.tracker.missing()}
        if self.tracker.done:
            return UserAction(stop="checkpoints_reached", note={**note, "next": "end"})
        if turn >= self.max_turns:
            failure: str | None = f"max turns ({self.max_turns}) exceeded"
            if self.tracker.may_yet_be_reached(exchanges):
                # spans still to come (a backend's, asked at the end; a receiver's late ones) may show them reached
                # within the turns: the checkpoints' own verdicts at grading say whether they were
                self.max_turns_failure, failure = failure, None
            return UserAction(stop="max_turns", failure=failure, note={**note, "next": "end"})
        if turn == 0 and self._static:
            return self._noted(self._say_static(), note, "static")
        action = await self._simulate(exchanges, context)
        return self._noted(action, note, "simulator" if action.turn else "end")

    # -- sources ----------------------------------------------------------------------------------------

    def _say_static(self) -> UserAction:
        turn = self._static[self._said]
        self._said += 1
        return UserAction(turn=turn)

    async def _simulate(self, exchanges: list[Exchange], context: Context) -> UserAction:
        assert self._simulator is not None
        try:
            action = await self._simulator.next_turn(exchanges, context)
        except (InfraError, ModelError) as exc:
            self.simulator_error = str(exc)
            raise
        if isinstance(self._simulator, ModelSimulator | ScriptSimulator | TargetSimulator):
            self._reasoning = self._simulator.last_reasoning
        if action.turn is not None:
            action.turn = action.turn.model_copy(update={"options": self._options, "source": "simulator"})
        elif action.stop == "goal_achieved":
            self.goal_note = self._reasoning
        return action

    def _missing_input(self, turn: int, said: str, awaiting: Awaiting, note: Mapping[str, object],
                       person: str | None = None) -> UserAction:
        policy = self.on_missing_input
        self.missing = Missing(turn, last_sentence(said), awaiting.hint, policy, person)
        note = {**note, "next": f"missing ({policy})"}
        nobody = f", and the person asked gave none ({person})" if person else ""
        if policy == "skip":
            self.skipped = f"the agent awaits input after turn {turn} and no next turn is defined{nobody}"
            return UserAction(stop="missing_input", note=note)
        if policy == "fail":
            return UserAction(stop="missing_input", note=note, failure=(
                f"the agent awaits input after turn {turn} ({quoted(last_sentence(said))}) and no input is available"
                f"{nobody} (on_missing_input: fail)"))
        return UserAction(stop="missing_input", note=note)

    def _noted(self, action: UserAction, note: Mapping[str, object], source: str) -> UserAction:
        action.note = {**note, "next": source}
        if source != "static" and isinstance(self._simulator, ModelSimulator):
            action.note["simulator_prompt"] = self._simulator.prompt.version  # the words the model was given
        if self._reasoning:
            action.note["simulator_reasoning"] = self._reasoning
            self._reasoning = None
        return action
