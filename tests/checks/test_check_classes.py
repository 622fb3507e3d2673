"""A check's class is checked once (a Check with a Spec, nothing left abstract), not twice for every assertion of
every test (issue 28's eleventh pass, docs/performance.md), and again when another class takes its key."""

from __future__ import annotations

import pytest

from tamesu import checks, plugins
from tamesu.checks.base import Check
from tamesu.checks.command import Command, CommandSpec


def test_a_check_class_is_checked_once_and_again_when_another_class_takes_its_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "_checked", {}, raising=False)
    checked: list[type] = []
    unimplemented = plugins.unimplemented
    monkeypatch.setattr(plugins, "unimplemented",
                        lambda kind, name, found: checked.append(found) or unimplemented(kind, name, found))
    probe = type("Probe", (Command,), {})
    monkeypatch.setitem(plugins._registered["checks"], "probe-of-checks", probe)
    for _ in range(3):
        assert checks.check_class("probe-of-checks") is probe
        assert checks.is_known("probe-of-checks")
    assert checks.parse_assertion({"probe-of-checks": "true"}).check.spec == CommandSpec(run="true")
    assert checked == [probe]
    broken = type("Broken", (Check,), {"Spec": CommandSpec})  # leaves Check's evaluate abstract
    monkeypatch.setitem(plugins._registered["checks"], "probe-of-checks", broken)
    for _ in range(2):  # refused each time, never taken from the one checked before
        with pytest.raises(plugins.PluginError, match="does not implement"):
            checks.check_class("probe-of-checks")
    assert checked == [probe, broken, broken]
