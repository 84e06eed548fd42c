"""The clock probe's record: what a shard writes to learn the broker's clock.

Written to ``{ns}.runs`` in a transaction that is always aborted, so no
read_committed reader (workers, the history) ever sees it; its produce
acknowledgement carries the broker's LogAppendTime. Shared by both executors of
the lifecycle machine (`actors.scheduler.shard_runner`, `simulation.node`).
"""

from __future__ import annotations

CLOCK_PROBE_KEY = b"\x00clock-probe"
CLOCK_PROBE_VALUE = b'{"v":1,"probe":"clock","note":"aborted; never a run"}'
