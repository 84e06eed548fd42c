"""Which event loop a long-running kafkron process runs on: asyncio's, or uvloop.

The scheduler's and the worker's CPU goes largely to the event loop's own
machinery per run (a task's steps, handles, callbacks). uvloop is a drop-in
asyncio loop written in Cython over libuv; a process opts in with ``--loop
uvloop`` or ``KAFKRON_LOOP=uvloop``, having installed the optional extra
(``pip install 'kafkron[uvloop]'``). The default stays asyncio's own loop, so
kafkron installs and runs as plain Python with nothing more; asked for uvloop
where it is not installed, the process says so on stderr and runs on asyncio's
loop rather than not at all (a fleet-wide setting must not stop a host that
lacks the extra).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os

log = logging.getLogger("kafkron")

ASYNCIO = "asyncio"
UVLOOP = "uvloop"
LOOPS = (ASYNCIO, UVLOOP)
ENV = "KAFKRON_LOOP"


def add_loop_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default=None,
        help=f"the event loop: {ASYNCIO} (default) or {UVLOOP} (the optional extra "
        f"kafkron[uvloop]; falls back to {ASYNCIO} with a warning when it is not "
        f"installed); default from {ENV}",
    )


def chosen(flag: str | None, environ: dict[str, str] | None = None) -> str:
    """The loop asked for: the flag, else ``KAFKRON_LOOP``, else asyncio's.

    Raises ``ValueError`` for a name that is neither (a typo in the environment
    must not pass silently)."""
    name = flag or (os.environ if environ is None else environ).get(ENV) or ASYNCIO
    if name not in LOOPS:
        raise ValueError(f"{ENV}={name!r}: the event loop is one of {', '.join(LOOPS)}")
    return name


def new_event_loop(name: str) -> asyncio.AbstractEventLoop:
    """A new loop of the kind ``name``; asyncio's when uvloop is asked for but absent."""
    if name == UVLOOP:
        try:
            uvloop = importlib.import_module("uvloop")
        except ImportError:
            log.warning(
                "the uvloop event loop was asked for (--loop or %s) but uvloop is not "
                "installed (pip install 'kafkron[uvloop]'); running on asyncio's loop",
                ENV,
            )
        else:
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
    return asyncio.new_event_loop()


def loop_kind(loop: asyncio.AbstractEventLoop) -> str:
    """The name of ``loop``'s kind, as the process logs it at start."""
    return UVLOOP if type(loop).__module__.startswith("uvloop") else ASYNCIO
