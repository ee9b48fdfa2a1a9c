"""Tool sources (docs/architecture.md §4): Python callables, subprocess commands, MCP servers.

Each source turns a tool definition into something the driver can call; this
package never decides *when* a tool runs, only how.
"""

from plait.tools.command import CommandResult, run_command
from plait.tools.python import (
    ToolArgumentError,
    bind_arguments,
    describe,
    input_schema,
    resolve_python,
)

__all__ = [
    "CommandResult",
    "ToolArgumentError",
    "bind_arguments",
    "describe",
    "input_schema",
    "resolve_python",
    "run_command",
]
