"""Deterministic failover simulation driving the production state machines.

One seed replays a whole run (TigerBeetle's VOPR): the real `actors.shard.ShardCore`
and `actors.worker.core.WorkerCore` run in loops shaped like their runtimes, over a
simulated Kafka, under faults drawn from that seed; invariant checkers judge the
topics afterwards. Modules:

- `clock`: the world's true time and each node's skewed `Clock`;
- `kafka`, `group`: partitions, transactions with epochs and fencing,
  read_committed, compaction; consumer groups with sessions and rebalances;
- `node`, `worker_node`, `jobs`: scheduler and worker processes, simulated jobs
  and the outside world's ledger of effects;
- `faults`, `scenario`, `world`: fault knobs, TOML scenarios, the event loop with
  its safety and liveness phases;
- `checkers`: one module per invariant; `run`, `timeline`, `plot`: the story,
  the figures, the verdicts, the picture (``kafkron simulate``).
"""
