"""From files on disk to the plan of tests the engine runs: the validation layer, above the registries it needs
(targets, checks, packs, report formats) and above `suite`, the data types of what users write.

| module        | its job                                                                      |
| ------------- | ---------------------------------------------------------------------------- |
| `model`       | `Project`, `LoadedSuite`, `PlannedTest`, `Plan`                               |
| `project`     | finding and loading tamesu.yaml, the suite files it names                    |
| `suites`      | `load_plan`: every suite, its tests expanded into planned tests, all problems |
| `targets`     | `targets:` validated by each type's spec model                               |
| `cases`       | `cases_file:` (CSV, JSON)                                                     |
| `_checks`     | what a test needs beyond its schema (a user side, models for judges)         |
| `_templates`  | every template names something that exists at run time                       |
"""

from tamesu.plan.cases import read_cases
from tamesu.plan.model import PROJECT_FILE, LoadedSuite, Plan, PlannedTest, Project
from tamesu.plan.project import find_project, load_project, suite_files
from tamesu.plan.suites import load_plan
from tamesu.plan.targets import load_project_targets

__all__ = ["PROJECT_FILE", "LoadedSuite", "Plan", "PlannedTest", "Project", "find_project", "load_plan",
           "load_project", "load_project_targets", "read_cases", "suite_files"]
