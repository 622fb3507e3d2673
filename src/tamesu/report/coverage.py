"""`tamesu coverage`: what the agents offered and what the tests exercised, read from what a run recorded.

Coverage is computed from the run directory alone (every run's result.json), never from a live agent, so it
works for any target that records these facts, including ones added later:

- skills offered: a `card` or `card_extended` event whose data has `skills` (ids, or objects with `id`/`name`);
  the card's `name` names the agent. A skill is exercised by a run that has any event whose data names it
  as `skill` (the a2a target records the skill it asked for).
- tools offered: a `transport`, `mcp_server`, `tools` or `tools_listed` event whose data has `tools` (names,
  or objects with `name`): the model target's declared tools, every tool an MCP server lists. A tool is
  exercised by a tool call of kind `tool` with its name.
- remote agents offered: a `remote_agent_started` event (`agent`: the engine starts every declared remote agent
  for each run, so one nobody called is listed), a `remote_agent` event (`name`) or a `remote_agents` event
  (`agents`: names or objects with `name`). One is exercised by a delegation (a tool call of kind
  `delegation`, named after the agent) or a `delegated` event naming it as `agent`.

Something exercised that nothing offered (a rest agent's tool calls, which no list declares) is listed too,
as seen but not offered; it does not count toward the percentage.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from tamesu.report.load import LoadedRun
from tamesu.results.records import SCHEMA_VERSION, RunResult

Kind = Literal["skills", "tools", "remote_agents"]


class Item(BaseModel):
    name: str
    offered: bool
    uses: int = 0
    """Calls (tools, delegations) or runs (skills) that exercised it."""
    tests: list[str] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over property
    @property
    def exercised(self) -> bool:
        return self.uses > 0


class Section(BaseModel):
    kind: Kind
    owner: str
    """The target (or agent card) the items belong to; `remote agents` for the suite's remote agents."""
    target_type: str | None = None
    items: list[Item] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over property
    @property
    def offered(self) -> int:
        return sum(1 for i in self.items if i.offered)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over property
    @property
    def covered(self) -> int:
        return sum(1 for i in self.items if i.offered and i.exercised)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over property
    @property
    def percent(self) -> float | None:
        return 100.0 * self.covered / self.offered if self.offered else None


class CoverageReport(BaseModel):
    schema_version: int = SCHEMA_VERSION
    run_dir: str
    sections: list[Section] = Field(default_factory=list)
    offered: int = 0
    covered: int = 0
    percent: float | None = None


def _names(values: object, *keys: str) -> list[str]:
    if not isinstance(values, list):
        return []
    names = []
    for value in values:
        if isinstance(value, str):
            names.append(value)
        elif isinstance(value, dict):
            name = next((value[k] for k in keys if isinstance(value.get(k), str)), None)
            if name:
                names.append(name)
    return names


class _Collector:
    def __init__(self) -> None:
        self.sections: dict[tuple[Kind, str], Section] = {}

    def item(self, kind: Kind, owner: str, target_type: str | None, name: str) -> Item:
        section = self.sections.setdefault((kind, owner), Section(kind=kind, owner=owner, target_type=target_type))
        found = next((i for i in section.items if i.name == name), None)
        if found is None:
            found = Item(name=name, offered=False)
            section.items.append(found)
        return found

    def offer(self, kind: Kind, owner: str, target_type: str | None, names: list[str]) -> None:
        for name in names:
            self.item(kind, owner, target_type, name).offered = True

    def use(self, kind: Kind, owner: str, target_type: str | None, name: str, test_id: str) -> None:
        item = self.item(kind, owner, target_type, name)
        item.uses += 1
        if test_id not in item.tests:
            item.tests.append(test_id)

    def read(self, result: RunResult, test_id: str) -> None:
        target, kind = result.target, result.target_type
        card_owner = target
        skills_used: set[str] = set()
        for event in result.events:
            data = event.data
            if event.name in ("card", "card_extended"):
                if isinstance(data.get("name"), str) and event.name == "card":
                    card_owner = f"{target} (card {data['name']})"
                self.offer("skills", card_owner, kind, _names(data.get("skills"), "id", "name"))
            if event.name in ("transport", "mcp_server", "tools", "tools_listed"):
                # an mcp server's tools that `allow_tools` withholds were never offered: not a gap to close
                listed = data.get("offered") if event.name == "mcp_server" and "offered" in data else data.get("tools")
                self.offer("tools", target, kind, _names(listed, "name"))
            if event.name == "remote_agent" and isinstance(data.get("name"), str):
                self.offer("remote_agents", "remote agents", None, [data["name"]])
            if event.name == "remote_agent_started" and isinstance(data.get("agent"), str):
                # what the engine records for every declared remote agent, called or not
                self.offer("remote_agents", "remote agents", None, [data["agent"]])
            if event.name == "remote_agents":
                self.offer("remote_agents", "remote agents", None, _names(data.get("agents"), "name"))
            if isinstance(data.get("skill"), str):
                skills_used.add(data["skill"])
        for skill in sorted(skills_used):
            self.use("skills", card_owner, kind, skill, test_id)
        # calls that never reached the tool: refused (not offered), with arguments that were no JSON object, or,
        # on an mcp server, answered by fuzz_tools
        unreached = Counter(str(event.data.get("tool")) for event in result.events
                            if event.name == "tool_arguments_invalid" or (event.name == "tool_result"
                            and (event.data.get("outcome") == "refused"
                                 or (kind == "mcp" and event.data.get("outcome") == "fuzzed"))))
        delegations = set()
        for call in result.tool_calls:
            if call.kind == "delegation":
                delegations.add(call.name)
                self.use("remote_agents", "remote agents", None, call.name, test_id)
            elif unreached[call.name]:
                unreached[call.name] -= 1
            else:
                self.use("tools", target, kind, call.name, test_id)
        # a `delegated` event counts only when no delegation tool call says the same (never twice)
        for event in result.events:
            agent = event.data.get("agent")
            if event.name == "delegated" and isinstance(agent, str) and agent not in delegations:
                self.use("remote_agents", "remote agents", None, agent, test_id)


def coverage(run: LoadedRun) -> CoverageReport:
    collector = _Collector()
    for result in run.results:
        for summary in result.runs:
            detail = run.run_result(summary)
            if detail is not None:
                collector.read(detail, result.id)
    sections = sorted(collector.sections.values(), key=lambda s: (s.kind == "remote_agents", s.owner, s.kind))
    for section in sections:
        # offered first, then by name: the gaps read as one block
        section.items.sort(key=lambda i: (not i.offered, i.name))
    offered = sum(s.offered for s in sections)
    covered = sum(s.covered for s in sections)
    return CoverageReport(run_dir=str(run.dir), sections=sections, offered=offered, covered=covered,
                          percent=100.0 * covered / offered if offered else None)


def table_lines(report: CoverageReport) -> list[tuple[str, str]]:
    """(style, line) pairs for the console."""
    if not report.sections:
        return [("yellow", "nothing to cover: the run recorded no agent card, tool list, tool call or remote agent")]
    lines: list[tuple[str, str]] = []
    width = max(len(i.name) for s in report.sections for i in s.items) if report.sections else 10
    for section in report.sections:
        what = section.kind.replace("_", " ")
        owner = section.owner + (f" ({section.target_type})" if section.target_type else "")
        if section.offered:
            share = f"{section.covered}/{section.offered} {what} exercised ({section.percent:.0f}%)"
        else:
            seen = len(section.items)
            share = f"{seen} {what if seen != 1 else what[:-1]} seen (none offered in the records)"
        lines.append(("bold", f"{owner}: {share}"))
        for item in section.items:
            mark = "✓" if item.exercised else "✗"
            style = "green" if item.exercised else "red"
            if not item.offered:
                style, note = "yellow", "  (not offered)"
            else:
                note = ""
            uses = f"{item.uses} use{'s' if item.uses != 1 else ''}" if item.exercised else "never exercised"
            tests = ", ".join(item.tests[:3]) + (f" +{len(item.tests) - 3}" if len(item.tests) > 3 else "")
            shown = f"  [{tests}]" if tests else ""
            lines.append((style, f"  {mark} {item.name.ljust(width)}  {uses}{note}{shown}"))
    if report.percent is not None:
        lines.append(("bold", f"total: {report.covered}/{report.offered} offered exercised ({report.percent:.0f}%)"))
    return lines
