"""Free ports for brokers a test starts of its own."""

from __future__ import annotations

import random
import socket

# Below Linux's ephemeral range (32768-60999 by default): a port found free there can
# be taken by any client connection's local port before the broker binds it (a
# secure broker on a fixed port in that range once failed to start that way).
_LOW, _HIGH = 20_000, 32_000


def free_port_block(size: int) -> int:
    """A base port p with p .. p + size - 1 all free right now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(_LOW, _HIGH - size)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + size):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
        return base
    raise RuntimeError(f"no block of {size} free ports found")
