"""Output of the commands: tables for people, JSON for scripts, exit messages.

The drawing itself is `actors.display` (the demo uses it too); its names are
re-exported here so every command writes ``output.print_table(...)``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from actors.display import STATUS_STYLES as STATUS_STYLES
from actors.display import carrier_target as carrier_target
from actors.display import delivered_text as delivered_text
from actors.display import duration as duration
from actors.display import instant as instant
from actors.display import is_terminal as is_terminal
from actors.display import job_text as job_text
from actors.display import print_json as print_json
from actors.display import print_table as print_table
from actors.display import short_instant as short_instant
from actors.display import target_cell as target_cell
from actors.display import target_text as target_text


def fail(command: str, message: str, code: int = 1) -> int:
    """Print ``kafkron COMMAND: message`` on stderr and return ``code`` (1 failure, 2 usage)."""
    print(f"kafkron {command}: {message}", file=sys.stderr)
    return code


def usage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """A ``func`` for a command given no action: print its help, return 2 (bad usage)."""

    def print_usage(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    return print_usage
