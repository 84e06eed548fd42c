"""A single-node broker of a test's own, for tests that stop and start it.

The shared local broker of the other tests must stay up, so a broker restart runs
on another port and another data directory (`kafkron broker start`'s launcher).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.paths import REPO


def free_port_pair() -> int:
    """A port p with p and p + 1 (the controller's) free right now."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port >= 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two adjacent free ports")


def broker(action: str, port: int, data_dir: Path) -> None:
    """``kafkron broker start|stop`` of the broker on ``port`` with ``data_dir``."""
    command = ["broker", action, "--port", str(port), "--data-dir", str(data_dir)]
    subprocess.run(
        [sys.executable, "-m", "actors.cli", *command],
        cwd=REPO,
        check=True,
        timeout=300,
    )


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """(port, data dir) of a broker started for the test and stopped after it."""
    port = free_port_pair()
    data_dir = tmp_path / "broker"
    broker("start", port, data_dir)
    try:
        yield port, data_dir
    finally:
        broker("stop", port, data_dir)
