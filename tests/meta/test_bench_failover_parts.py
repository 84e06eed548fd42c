"""`bench/e2e_fire.py`'s failover split into the group's part and kafkron's: when a
scheduler's log says shard 0 was handed to it. The parsing only: no scheduler runs."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import ModuleType

from tests.kit.bench import load_bench


def _e2e_fire() -> ModuleType:
    return load_bench("e2e_fire")


def _local_ms(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)


LOG = """\
2026-12-04 19:49:10,890 INFO kafkron.scheduler assigned shards []
2026-12-04 19:49:10,891 INFO kafkron.scheduler scheduler started: group g, 1 shards
2026-12-04 19:49:41,002 INFO kafkron.scheduler shard 0 figures: {'assigned shards [0]': 1}
2026-12-04 19:51:02,610 INFO kafkron.scheduler assigned shards [1, 0]
2026-12-04 19:51:09,000 INFO kafkron.scheduler assigned shards [0]
"""


def test_the_first_assignment_of_shard_0_at_or_after_an_instant(tmp_path: Path) -> None:
    scheduler = object.__new__(_e2e_fire().Scheduler)  # its log only: no process
    scheduler.log = tmp_path / "scheduler.log"
    scheduler.log.write_text(LOG)
    handed = _local_ms("2026-12-04 19:51:02,610")
    # Not the empty assignment, nor a line that only quotes the words.
    assert scheduler.assigned_ms(_local_ms("2026-12-04 19:49:00,000")) == handed
    assert scheduler.assigned_ms(handed) == handed
    assert scheduler.assigned_ms(handed + 1) == _local_ms("2026-12-04 19:51:09,000")
    assert scheduler.assigned_ms(handed + 60_000) is None
