"""tamesu: test conversational AI agents the way their users meet them.

The public API: what a plug-in or a Python user imports, all from here (`from tamesu import Target`), and
`tamesu.testing` for script tests. Anything else may move between versions. Each name is imported on first
use, so `import tamesu` (and `tamesu --version`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_HOMES: dict[str, str] = {
    # registering what a suite names (docs/plugins.md)
    "register": "tamesu.plugins",
    "PluginError": "tamesu.plugins",
    # targets
    "Target": "tamesu.targets.base",
    "TargetSpec": "tamesu.targets.base",
    "StepContext": "tamesu.targets.base",
    # the conversation a target carries
    "Session": "tamesu.conversation",
    "UserTurn": "tamesu.conversation",
    "AgentTurn": "tamesu.conversation",
    "ToolCall": "tamesu.conversation",
    "FileRef": "tamesu.conversation",
    "TurnError": "tamesu.conversation",
    "InfraError": "tamesu.errors",
    # checks
    "Check": "tamesu.checks.base",
    "RunView": "tamesu.checks.base",
    "Verdict": "tamesu.checks.base",
    # model providers
    "Provider": "tamesu.models.base",
    "ModelSpec": "tamesu.models.spec",
    "ModelRequest": "tamesu.models.base",
    "ModelResponse": "tamesu.models.base",
    "ModelError": "tamesu.models.base",
    # reports
    "ReportFormat": "tamesu.report.formats",
    "LoadedRun": "tamesu.report.load",
    # evaluators
    "Sample": "tamesu.evaluators.base",
    "Score": "tamesu.evaluators.base",
    # the strict base model of every spec (unknown keys are errors)
    "Strict": "tamesu.types",
    # its fields as a user writes them: `true`/`false` only, a number never as quoted text
    "YamlBool": "tamesu.types",
    "YamlFloat": "tamesu.types",
    "YamlInt": "tamesu.types",
    # script tests
    "AgentSession": "tamesu.testing",
    "AsyncAgentSession": "tamesu.testing",
}

__all__ = [
    "AgentSession",
    "AgentTurn",
    "AsyncAgentSession",
    "Check",
    "FileRef",
    "InfraError",
    "LoadedRun",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSpec",
    "PluginError",
    "Provider",
    "ReportFormat",
    "RunView",
    "Sample",
    "Score",
    "Session",
    "StepContext",
    "Strict",
    "Target",
    "TargetSpec",
    "ToolCall",
    "TurnError",
    "UserTurn",
    "Verdict",
    "YamlBool",
    "YamlFloat",
    "YamlInt",
    "__version__",
    "register",
]

if TYPE_CHECKING:
    from tamesu.checks.base import Check, RunView, Verdict
    from tamesu.conversation import AgentTurn, FileRef, Session, ToolCall, TurnError, UserTurn
    from tamesu.errors import InfraError
    from tamesu.evaluators.base import Sample, Score
    from tamesu.models.base import ModelError, ModelRequest, ModelResponse, Provider
    from tamesu.models.spec import ModelSpec
    from tamesu.plugins import PluginError, register
    from tamesu.report.formats import ReportFormat
    from tamesu.report.load import LoadedRun
    from tamesu.targets.base import StepContext, Target, TargetSpec
    from tamesu.testing import AgentSession, AsyncAgentSession
    from tamesu.types import Strict, YamlBool, YamlFloat, YamlInt


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tamesu' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
