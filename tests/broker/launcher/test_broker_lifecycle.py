"""`kafkron broker start|status|stop` on a second, private broker (real Kafka).

Runs beside the shared broker on its own port pair and data dir, so it proves the
commands end to end without disturbing anyone: start waits until the broker
answers, a second start finds it running, a taken port is refused with advice,
stop is clean and status tells the truth throughout.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.broker


def _free_port_pair() -> int:
    """A port p with p and p + 1 both free (client and controller listeners)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 60000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair found")


def _kafkron(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )


def test_start_status_stop_of_a_private_broker(tmp_path: Path) -> None:
    port = str(_free_port_pair())
    where = ["--port", port, "--data-dir", str(tmp_path / "kafka")]
    try:
        started = _kafkron("broker", "start", *where)
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("started: broker running on 127.0.0.1:" + port)

        status = _kafkron("broker", "status", *where)
        assert status.returncode == 0, status.stdout
        again = _kafkron("broker", "start", *where)
        assert again.returncode == 0
        assert again.stdout.startswith("already running")

        # The same port from another data dir is someone else's broker: refuse, with advice.
        clash = _kafkron("broker", "start", "--port", port, "--data-dir", str(tmp_path / "other"))
        assert clash.returncode == 1
        assert f"port {port} on 127.0.0.1 is in use" in clash.stderr
        assert "--port" in clash.stderr
        assert len(clash.stderr.strip().splitlines()) == 1

        log = (tmp_path / "kafka" / "broker.log").read_text()
        assert "Kafka Server started" in log  # log4j2 binding works: the broker logs
    finally:
        stopped = _kafkron("broker", "stop", *where)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("stopped broker pid")
    assert not (tmp_path / "kafka" / "broker.pid").exists()
    down = _kafkron("broker", "status", *where)
    assert down.returncode == 1
    assert "no broker answering" in down.stdout
    assert _kafkron("broker", "stop", *where).stdout.startswith("no broker running")
