"""Schedule actors on Kafka: partitions as shards, one transaction per batch.

`SchedulerRuntime` is the process (`kafkron scheduler`); `ShardRunner` one shard;
`SkewEstimator` the clock comparison with the broker; `Clock` what the simulation
replaces.
"""

from actors.scheduler.clock import Clock, SystemClock
from actors.scheduler.runtime import RuntimeOptions, SchedulerRuntime
from actors.scheduler.shard_runner import ShardFenced, ShardRunner, ShardWriteFailed
from actors.scheduler.skew import SkewEstimator

__all__ = [
    "Clock",
    "RuntimeOptions",
    "SchedulerRuntime",
    "ShardFenced",
    "ShardRunner",
    "ShardWriteFailed",
    "SkewEstimator",
    "SystemClock",
]
