"""What `tamesu doctor` says of an mcp target at a url: the MCP session opened as a run opens it (initialize, then
tools/list), with its headers and TLS, bounded, one attempt. An open port said nothing of a url at a wrong path (a
web page, a 404), nor of a server that refuses the token: each run then failed at its start (exit 3).

Only the server is spoken to: no model is asked and no tool called. A target whose `command` tamesu starts is not
opened here (doctor starts nothing; it says whether the command is found).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.suite.secrets import Redactor
from tamesu.suite.templates import Context
from tamesu.targets.mcp._spec import McpTargetSpec
from tamesu.targets.mcp.target import McpTarget

CHECK_TIMEOUT = 5.0
"""The session's start (connect, initialize, the tool listing) in `tamesu doctor`, at most; a run gives
`connect.timeout`."""


async def check(spec: McpTargetSpec, name: str, context: Context, redactor: Redactor, folder: Path,
                timeout: float = CHECK_TIMEOUT) -> tuple[bool, str]:
    """(True: a run opens it, False: a run fails at its start) and one line, masked."""
    bound = min(spec.connect.timeout, timeout)
    quick = spec.model_copy(update={
        "rate_limit_retries": 0, "connect": spec.connect.model_copy(update={"attempts": 1, "timeout": bound})})
    target = McpTarget(quick, name)
    with tempfile.TemporaryDirectory(prefix="tamesu-doctor-") as scratch:
        session = Session(context=context, artifacts_dir=Path(scratch), redactor=redactor, run_id="doctor",
                          base_dir=folder)
        try:
            # the target's own start, which says a wrong path, a refused token or no MCP server as a run says it;
            # a whole bound besides, for a server that trickles its answers past the handshake's
            async with asyncio.timeout(2 * bound + 1):
                info = await target._connect(session, target._rendered(session))
        except InfraError as exc:
            words = " ".join(str(exc).split()).removeprefix(f"{target._what}: ")
            return False, redactor.text(words)
        except TimeoutError:
            return False, f"the MCP server did not answer the session's start within {2 * bound + 1:g}s"
        finally:
            with contextlib.suppress(Exception):
                await target.close()
    server = " ".join(part for part in (info.name, info.version) if part)
    tools = sorted(tool.name for tool in info.tools)
    listed = f"{len(tools)} tool{'' if len(tools) == 1 else 's'}" + (f" ({', '.join(tools[:10])}"
                                                                     f"{', …' if len(tools) > 10 else ''})"
                                                                     if tools else "")
    return True, redactor.text(f"MCP server {server or '(no name)'} answered the session's start (initialize, "
                               f"protocol {info.protocol_version}): {listed}")
