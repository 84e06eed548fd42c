"""The demo's child processes: started in their own sessions, stopped in order, never left behind.

Each child is ``python -m actors.cli ...`` with the demo's namespace in its
environment and its output in a log file (so the live view stays readable). A
child runs in its own session, so the terminal's Ctrl-C reaches only the demo,
which then stops the children itself, in an order that loses nothing: the
scheduler first (no new fires), then the workers (they finish or abandon their
runs and leave the group), the recorder last (once it has read everything).

`stop` sends SIGTERM, waits ``grace_s``, then SIGKILLs whatever is still alive and
reaps it: when `Children.stop_all` returns, no child of the demo runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass(slots=True)
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    stopping: bool = False
    killed: bool = False

    @property
    def exit_code(self) -> int | None:
        return self.process.poll()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass(slots=True)
class Children:
    env: Mapping[str, str]
    log_dir: Path
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, args: Sequence[str]) -> Child:
        """Start ``kafkron ARGS`` as child ``name``; its output goes to ``<log_dir>/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("ab")
        argv = [sys.executable, "-m", "actors.cli", *args]
        process = subprocess.Popen(
            argv,
            env=dict(self.env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = Child(name, argv, log_path, process, log)
        self.children.append(child)
        return child

    def died(self) -> list[Child]:
        """Children that exited without being asked to."""
        return [c for c in self.children if not c.stopping and c.exit_code is not None]

    async def stop(self, children: Sequence[Child], grace_s: float) -> None:
        """SIGTERM ``children``, wait up to ``grace_s``, SIGKILL the rest; reap all."""
        for child in children:
            child.stopping = True
            if child.exit_code is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(c.exit_code is None for c in children) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for child in children:
            if child.exit_code is None:
                child.killed = True
                with contextlib.suppress(ProcessLookupError):
                    # The whole session: a child's own helpers die with it.
                    os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait()
            child.log.close()

    async def stop_all(self, grace_s: float) -> None:
        """Stop every child still running, last started first."""
        await self.stop([c for c in reversed(self.children) if c.exit_code is None], grace_s)
        for child in self.children:
            if not child.log.closed:
                child.log.close()

    def by_prefix(self, prefix: str) -> list[Child]:
        return [c for c in self.children if c.name.startswith(prefix)]
