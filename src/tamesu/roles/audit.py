"""The audit of tamesu's own simulated user after a failed run: was the failure the agent's, or did the
model playing the user break its part?

Deterministic checks come first (cheap, and sure when they fire): an empty line, a user who says it is an AI
or a simulation, a line repeated word for word, a user who speaks as the agent, a line that gives one of the
persona's facts another value. Only the simulator's own lines are read (`source == "simulator"`): a script's
or a person's lines are what the tester wrote. Then, with `models.simulator_audit`, a model audit: its prompt
is versioned (`prompts/simulator_audit.vN.md`), its answer read strictly, and a finding none of whose quotes
is in the user's lines is not taken (the agent keeps the blame, as a judge's unsupported pass does not pass).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from tamesu.matching import quoted
from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest
from tamesu.models.structured import StructuredOutputError, ask_structured
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.evidence import check_evidence, normalised
from tamesu.roles.failures import infra_error
from tamesu.roles.transcript import as_text

_AI = re.compile(
    r"\b(as an ai\b|i(?: am|'m) (?:an? |just an? )?(?:ai|artificial intelligence|language model|chatbot|bot|"
    r"virtual assistant|assistant|simulat\w*)\b|(?:large )?language model\b|this is (?:a|just a) simulation|"
    r"simulated user|i am not a real (?:person|user|human))", re.IGNORECASE)
_AGENT = re.compile(
    r"\b(how (?:can|may) i (?:help|assist) you|is there anything (?:else )?i can (?:help|do)|"
    r"what can i do for you|i(?:'d| would) be (?:happy|glad) to (?:help|assist) you)", re.IGNORECASE)
_REPEAT_WORDS = 3
"""A repeated line shorter than this ("yes", "ok thanks") is a plausible user, not a loop."""


@dataclass
class Finding:
    """The simulated user broke its part: why, and its words that show it."""

    reason: str
    evidence: list[str] = field(default_factory=list)
    check: str = "deterministic"
    """`deterministic`, or the audit prompt's version (`simulator_audit.v1`) when a model found it."""
    model: str | None = None


def _fact_contradicted(text: str, facts: Mapping[str, str]) -> str | None:
    """The first fact the line names with another value: `booking ref is XYZ` when the fact is ABC."""
    for key, value in facts.items():
        words = r"\W+".join(re.escape(w) for w in re.split(r"[\s_\-]+", key.strip()) if w)
        if not words:
            continue
        said = re.search(rf"\b{words}\b(?:\W+(?:is|was|=|:)\b)?\W+([\w@.\-]+)", text, re.IGNORECASE)
        if said and normalised(value) not in normalised(text) and said.group(1).casefold() != value.casefold():
            return f"it gave its {key} as {quoted(said.group(1))}, the persona's fact is {quoted(value)}"
    return None


def deterministic_finding(lines: Sequence[Mapping[str, object]], facts: Mapping[str, str] | None = None
                          ) -> Finding | None:
    """The first way the simulator's lines show it broke its part, or None."""
    previous: str | None = None
    for line in lines:
        if line.get("role") != "user" or line.get("source") != "simulator":
            continue
        text = str(line.get("text") or "")
        turn = line.get("turn", "?")
        if not text.strip():
            return Finding(f"the simulated user said nothing at turn {turn}")
        if (found := _AI.search(text)) is not None:
            return Finding(f"the simulated user broke character at turn {turn}: it says it is an AI "
                           f"({quoted(found.group(0))})", [text])
        if (found := _AGENT.search(text)) is not None:
            return Finding(f"the simulated user spoke as the agent at turn {turn} ({quoted(found.group(0))})", [text])
        if previous is not None and normalised(text) == normalised(previous) and len(text.split()) >= _REPEAT_WORDS:
            return Finding(f"the simulated user repeated its previous line word for word at turn {turn}", [text])
        if facts and (contradiction := _fact_contradicted(text, facts)) is not None:
            return Finding(f"the simulated user contradicted its persona at turn {turn}: {contradiction}", [text])
        previous = text
    return None


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passed: bool = Field(alias="pass")
    reason: str = Field(pattern=r"\S")
    evidence: list[str] = Field(default_factory=list)


class SimulatorAudit:
    """`SimulatorAudit(client).audit(...)`: a model's finding on the simulated user, or None when it played
    its part (or when the finding quotes nothing the user said). A model that cannot answer is an InfraError."""

    def __init__(self, client: ModelClient, *, attempts: int = 3) -> None:
        self._client = client
        self._attempts = attempts
        self.prompt = _prompts.load("simulator_audit")

    async def audit(self, lines: Sequence[Mapping[str, object]], persona: Mapping[str, object], goal: str | None,
                    failures: Sequence[str]) -> Finding | None:
        shown = [{"role": line.get("role"), "text": line.get("text"), "turn": line.get("turn")} for line in lines]
        user_lines = [str(line.get("text") or "") for line in lines if line.get("role") == "user"]
        system = self.prompt.render("system")
        user = self.prompt.render(
            "user", persona=_persona_text(persona), goal=goal or "(none given)",
            failures="\n".join(f"- {f}" for f in failures) or "(none given)", transcript=as_text(shown, "(empty)"))
        context = {"mode": "simulator_audit", "transcript": shown, "persona": dict(persona), "goal": goal,
                   "failures": list(failures)}
        request = ModelRequest(purpose="simulator_audit", temperature=0.0, prompt_version=self.prompt.version,
                               messages=[Message(role="system", content=system), Message(role="user", content=user)],
                               context=context)
        try:
            found = await ask_structured(self._client, request, _Answer, attempts=self._attempts, strict=True)
        except StructuredOutputError as exc:
            raise infra_error("simulator_audit", ModelError(
                f"no answer that fits the schema after {len(exc.attempts)} attempts")) from exc
        except ModelError as exc:
            raise infra_error("simulator_audit", exc) from exc
        answer = found.value
        if answer.passed:
            return None
        if not check_evidence(answer.evidence, user_lines).supported:
            return None  # a finding that shows nothing the user said does not take the blame off the agent
        last = found.responses[-1]
        return Finding(f"the simulator audit found the simulated user at fault: {answer.reason}",
                       answer.evidence, check=self.prompt.version, model=f"{last.provider}:{last.model}")


def _persona_text(persona: Mapping[str, object]) -> str:
    parts = [f"{key}: {value}" for key, value in persona.items() if value not in (None, "", {}, [])]
    return "\n".join(parts) or "(none given)"
