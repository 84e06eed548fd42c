"""Where the local broker keeps its jars, data, log and pid file.

Everything lives under one cache directory so a second start reuses the jars and
the formatted storage, and ``rm -rf`` of one directory resets it all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PORT = 9092
HOST = "127.0.0.1"


def default_port() -> int:
    raw = os.environ.get("KAFKRON_BROKER_PORT")
    if not raw:
        return DEFAULT_PORT
    try:
        return int(raw)
    except ValueError:
        return DEFAULT_PORT


def cache_dir() -> Path:
    explicit = os.environ.get("KAFKRON_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kafkron"


@dataclass(frozen=True, slots=True)
class BrokerLayout:
    """Ports and files of one local broker. The controller listens on ``port + 1``."""

    port: int
    data_dir: Path
    # A node of a secure cluster keeps its CA, broker key and secrets here, shared by
    # every node (one CA, one set of SCRAM users); None: ``<data_dir>/secure``.
    secure_home: Path | None = None

    @classmethod
    def resolve(cls, port: int | None = None, data_dir: str | Path | None = None) -> BrokerLayout:
        """Fill what the caller left out from the environment, then from defaults."""
        chosen_port = port if port is not None else default_port()
        if data_dir is None:
            env_dir = os.environ.get("KAFKRON_BROKER_DATA_DIR")
            data_dir = env_dir if env_dir else cache_dir() / f"broker-{chosen_port}"
        return cls(port=chosen_port, data_dir=Path(data_dir).expanduser().resolve())

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_dirs(self) -> Path:
        """Kafka's own partition data (``log.dirs``), not text logs."""
        return self.data_dir / "kraft"

    @property
    def server_properties(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log4j2_config(self) -> Path:
        return self.data_dir / "log4j2.properties"

    @property
    def log_file(self) -> Path:
        """The broker's text log: its stdout and stderr, log4j2 writes to the console."""
        return self.data_dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"
