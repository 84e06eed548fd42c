"""The schedule actor's pure core: one shard's schedules, runs, retries and changelog.

`ShardCore` is the whole interface (see `actors.shard.core` for the theory of
operation); the other modules are its parts, one idea each: `state` (per
schedule state and its changelog JSON), `definition` (normalised definitions,
shared compiled specs), `misfire`, `overlap`, `retry`, `routing`.
"""

from actors.shard.core import ShardCore

__all__ = ["ShardCore"]
