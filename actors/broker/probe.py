"""Is a broker answering? One metadata request through aiokafka says.

A listening socket is not enough: a KRaft broker accepts connections before it has
registered with its controller, and until then metadata lists no brokers. Ready
means a metadata response that names at least one broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

from aiokafka.client import AIOKafkaClient

from topics.closing import bounded


@contextlib.contextmanager
def quiet_aiokafka() -> Iterator[None]:
    """Silence aiokafka's connection errors: a refused probe is an expected answer."""
    logger = logging.getLogger("aiokafka")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


async def metadata_ok(bootstrap: str, timeout_s: float = 5.0, **security: Any) -> bool:
    """True if `bootstrap` answers a metadata request naming at least one broker.

    `security` holds aiokafka's security keyword arguments for a secure broker.
    """
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(timeout_s * 1000),
        client_id="kafkron-probe",
        **security,
    )
    with quiet_aiokafka():
        try:
            await asyncio.wait_for(client.bootstrap(), timeout_s)
            return bool(client.cluster.brokers())
        except Exception:
            return False
        finally:
            # Bounded like every client close (`topics.closing`): a broker that died
            # mid-request must not hang a probe.
            await bounded(client.close(), "the probe client", timeout_s)


def answers(bootstrap: str, timeout_s: float = 5.0, **security: Any) -> bool:
    """Blocking form of `metadata_ok` for the CLI (not inside a running loop)."""
    return asyncio.run(metadata_ok(bootstrap, timeout_s, **security))


def port_in_use(host: str, port: int) -> bool:
    """True if something accepts TCP connections on (host, port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0
