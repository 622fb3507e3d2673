"""MkDocs hooks of the documentation site (`hooks:` in mkdocs.yml): generated parts and links into the repository.

- `<!-- tamesu:keys TYPE -->` becomes the key table of a target type, `<!-- tamesu:cli -->` the CLI reference,
  `<!-- tamesu:schema-keys suite|project -->` the top-level keys of a suite or tamesu.yaml,
  `<!-- tamesu:model module:Class -->` the keys of any model a user writes (scripts/docs_gen.py);
- `schema/suite.schema.json` and `schema/project.schema.json` are added to the site, as `tamesu schema` writes them;
- a link to a file of the repository outside `docs/` (an example, the proto) works on GitHub but not in the site:
  it becomes the path in code, and a path that does not exist is a warning, so `mkdocs build --strict` fails on it;
  so is a path of the repository written in code (`src/...`, `examples/...`, `tests/...`) that names nothing
  (not `scripts/...`: the JSONL page names scripts of a user's project).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# the worktree's own source and generator, whatever tamesu the virtualenv has installed
for _path in (ROOT / "scripts", ROOT / "src"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import docs_gen  # noqa: E402

log = logging.getLogger("mkdocs.plugins.tamesu")

_MARKER = re.compile(r"^<!-- tamesu:(keys|cli|schema-keys|model)(?: ([A-Za-z0-9_.:-]+))? -->$", re.M)
# a file of the repository named in code (`src/tamesu/targets/audio/socket.py`, `examples/ci/x.yml::job`)
_PATH = re.compile(r"`((?:src|examples|tests|bench|proto)/[\w./-]+\.[a-z]+)(?:::[^`]*)?`")
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _generated(match: re.Match[str], page: str) -> str:
    what, arg = match.group(1), match.group(2)
    try:
        if what == "keys" and arg:
            return docs_gen.key_table(arg)
        if what == "model" and arg:
            return docs_gen.model_table(arg)
        if what == "cli":
            return docs_gen.cli_reference()
        if what == "schema-keys" and arg in ("suite", "project"):
            return docs_gen.schema_keys(arg)
    except (KeyError, ImportError, AttributeError) as exc:
        log.warning("%s: %s cannot be generated: %s", page, match.group(0), exc)
        return ""
    log.warning("%s: unknown marker %s", page, match.group(0))
    return ""


def _repo_link(match: re.Match[str], page_path: Path, docs_dir: Path, page: str) -> str:
    text, target = match.group(1), match.group(2)
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return match.group(0)
    resolved = (page_path.parent / target).resolve()
    if resolved.is_relative_to(docs_dir):
        return match.group(0)  # MkDocs checks links between pages itself
    if not resolved.is_relative_to(ROOT) or not resolved.exists():
        log.warning("%s: the link to %s names no file of the repository", page, target)
        return match.group(0)
    where = resolved.relative_to(ROOT).as_posix()
    if text.strip("`") == where.rstrip("/"):
        return text if text.startswith("`") else f"`{text}`"
    return f"{text} (`{where}`)"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    source = docs_dir / page.file.src_path
    name = page.file.src_uri
    markdown = _MARKER.sub(lambda m: _generated(m, name), markdown)
    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced:
            line = _LINK.sub(lambda m: _repo_link(m, source, docs_dir, name), line)
            for path in _PATH.findall(line):
                if not (ROOT / path).exists():
                    log.warning("%s: `%s` names no file of the repository", name, path)
        out.append(line)
    return "".join(out)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for kind, schema in docs_gen.schemas().items():
        content = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
        files.append(File.generated(config, f"schema/{kind}.schema.json", content=content))
    return files
