"""The user side of a JSONL case, plugged into the engine's conversation loop as a `UserSimulator`.

- standard: one turn carrying the history; the conversation ends after the agent's answer.
- multi_turn: the static turns in order (always said: the test wrote them). When they run out and the agent
  awaits input (`tamesu.jsonl.awaiting`), the next input comes from the simulator, then a person
  (`--interactive`), and otherwise `on_missing_input` decides: `skip` (the run is skipped), `fail`, `end`.
  An agent that no longer awaits input ends the conversation. More than `max_turns` turns fail.
- dynamic: the first input (`input`, else the simulator), then the simulator, until every required
  checkpoint is reached (passed), the simulator ends or `max_turns` passes (the checkpoints missing fail).
Every decision is recorded as a `user_side` event with the awaiting-input verdict and its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tamesu.checks.base import RunView
from tamesu.conversation import Exchange, HistoryMessage, UserTurn
from tamesu.errors import InfraError
from tamesu.jsonl.awaiting import Awaiting, detect
from tamesu.jsonl.checkpoints import Tracker
from tamesu.jsonl.helpers import TargetSimulator
from tamesu.jsonl.human import Human
from tamesu.jsonl.parser import ParsedCase, SimulatorRef, file_ref
from tamesu.jsonl.schema import ChatMessage, ContentPart, MissingInput
from tamesu.jsonl.simulators import ScriptSimulator
from tamesu.models.base import Models
from tamesu.roles.simulator import ModelSimulator, UserAction, UserSimulator
from tamesu.suite.schema import Persona, Scenario
from tamesu.suite.templates import Context

MISSING_HINT = "Add more turns, use --interactive, or configure a simulator"


def user_turn(messages: list[ChatMessage], base_dir: Path | list[Path], options: dict[str, Any], *,
              attachments: list[ContentPart] | None = None, source: str = "static") -> UserTurn:
    """The last message as the turn, the ones before it as its history."""
    *earlier, last = messages
    history = [HistoryMessage(role=m.role, content=m.text, files=[file_ref(p, base_dir) for p in m.files])
               for m in earlier]
    files = [file_ref(p, base_dir) for p in [*last.files, *(attachments or [])]]
    return UserTurn(text=last.text, files=files, history=history, options=options,
                    source=source)


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


@dataclass
class Interaction:
    human: Human | None
    timeout: float


class CaseUser(UserSimulator):
    def __init__(self, parsed: ParsedCase, *, models: Models | None, seed: int, options: dict[str, Any],
                 max_turns: int, on_missing_input: MissingInput, interaction: Interaction,
                 tracker: Tracker | None) -> None:
        self.parsed = parsed
        self.case = parsed.case
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
        self._options = options
        self._static = self._static_turns()
        self._said = 0
        self._simulator = self._make_simulator(parsed.simulator, seed)
        self._reasoning: str | None = None

    # -- what the case gives ------------------------------------------------------------------------------

    def _static_turns(self) -> list[UserTurn]:
        case, base = self.case, self.parsed.file_dirs or self.parsed.base_dir
        if case.turns:
            return [user_turn([t.input], base, {**self._options, **(t.options.sent() if t.options else {})},
                              attachments=t.attachments) for t in case.turns]
        return [user_turn(case.input, base, self._options)] if case.input else []

    def _make_simulator(self, ref: SimulatorRef | None, seed: int) -> UserSimulator | None:
        if ref is None:
            return None
        settings = ref.settings
        if ref.kind == "script":
            assert ref.function is not None
            return ScriptSimulator(ref.function, ref.shown, settings, self.max_turns, self.case.id)
        if ref.kind == "target":
            return TargetSimulator(ref.helper, settings, self.max_turns, self.models, self.case.id)
        if self.models is None:
            raise InfraError("the simulator needs a model: configure models in tamesu.yaml")
        persona = settings.get("persona")
        if isinstance(persona, dict):
            persona = Persona.model_validate({k: v for k, v in persona.items() if k in Persona.model_fields})
        else:
            persona = Persona(background=str(persona)) if persona else None
        scenario = Scenario(goal=settings.get("goal"), stop_when=settings.get("stop_when"),
                            max_turns=self.max_turns)
        return ModelSimulator(self.models.client("simulator", ref.name), scenario, persona,
                              base_dir=self.parsed.base_dir, seed=seed, run_context=True)

    # -- the next turn ----------------------------------------------------------------------------------

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        mode = self.case.mode
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
            reply = await self.interaction.human.ask(self.case.id, turn, exchanges[-1].agent.text, awaiting.hint,
                                                     self.interaction.timeout)
            if reply:
                return UserAction(turn=UserTurn(text=reply, options=self._options, source="human"),
                                  note={**note, "next": "human"})
        return self._missing_input(turn, exchanges[-1].agent.text, awaiting, note)

    async def _dynamic(self, exchanges: list[Exchange], context: Context) -> UserAction:
        assert self.tracker is not None
        turn = len(exchanges)
        await self.tracker.catch_up(self._view(exchanges, context))
        note = {"after_turn": turn, "checkpoints_missing": self.tracker.missing()}
        if self.tracker.done:
            return UserAction(stop="checkpoints_reached", note={**note, "next": "end"})
        if turn >= self.max_turns:
            return UserAction(stop="max_turns", failure=f"max turns ({self.max_turns}) exceeded",
                              note={**note, "next": "end"})
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
        action = await self._simulator.next_turn(exchanges, context)
        if isinstance(self._simulator, ModelSimulator | ScriptSimulator | TargetSimulator):
            self._reasoning = self._simulator.last_reasoning
        if action.turn is not None:
            action.turn = action.turn.model_copy(update={"options": self._options, "source": "simulator"})
        elif action.stop == "goal_achieved":
            self.goal_note = self._reasoning
        return action

    def _missing_input(self, turn: int, said: str, awaiting: Awaiting, note: dict[str, Any]) -> UserAction:
        policy = self.on_missing_input
        self.missing = Missing(turn, last_sentence(said), awaiting.hint, policy)
        note = {**note, "next": f"missing ({policy})"}
        if policy == "skip":
            self.skipped = f"the agent awaits input after turn {turn} and no next turn is defined"
            return UserAction(stop="missing_input", note=note)
        if policy == "fail":
            return UserAction(stop="missing_input", note=note, failure=(
                f"the agent awaits input after turn {turn} ({last_sentence(said)!r}) and no input is available "
                "(on_missing_input: fail)"))
        return UserAction(stop="missing_input", note=note)

    def _noted(self, action: UserAction, note: dict[str, Any], source: str) -> UserAction:
        action.note = {**note, "next": source}
        if source != "static" and isinstance(self._simulator, ModelSimulator):
            action.note["simulator_prompt"] = self._simulator.prompt.version  # the words the model was given
        if self._reasoning:
            action.note["simulator_reasoning"] = self._reasoning
            self._reasoning = None
        return action

    def _view(self, exchanges: list[Exchange], context: Context) -> RunView:
        return RunView(exchanges=list(exchanges), metrics={}, captured={}, events=[],
                       tool_calls=[call for e in exchanges for call in e.agent.tool_calls], context=context,
                       base_dir=self.parsed.base_dir, models=self.models)
