"""The JSONL design's own check kinds now live in `tamesu.checks` (`values`, `negate`, `script`), usable from
YAML suites too; these names stay importable from here for code written before the move."""

from tamesu.checks.functions import Role, load_function
from tamesu.checks.negate import Negated
from tamesu.checks.script import Script, ScriptRun, ScriptSpec
from tamesu.checks.values import Equals, EqualsSpec, JsonType, TypeCheck, TypeSpec, json_type

__all__ = ["Equals", "EqualsSpec", "JsonType", "Negated", "Role", "Script", "ScriptRun", "ScriptSpec", "TypeCheck",
           "TypeSpec", "json_type", "load_function"]
