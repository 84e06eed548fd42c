"""Schedule actors on Kafka: partitions as shards, one transaction per batch.

`runtime.SchedulerRuntime` is the process (`kafkron scheduler`), the executor of
`lifecycle.SchedulerMachine` on aiokafka; `shard_runner.ShardRunner` one shard's
producer and transactions; `skew.SkewEstimator` the clock comparison with the
broker; `clock.Clock` what the simulation replaces.

Nothing is imported here: the pure modules of this package (`lifecycle`, `turn`,
`skew`, `clock`, `oversize`) are used by the simulation, which must not load the
Kafka client that `runtime` and `shard_runner` need.
"""
