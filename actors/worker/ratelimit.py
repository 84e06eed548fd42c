"""Rate limits on the worker: each key's token bucket, and the keys' pauses
(docs/DESIGN.md §8.5). Pure: no I/O, no clock.

Every run of a rate-limit key is written to one partition of its queue's topic (the
shard places it by the key, `topics.ratelimits.placed_by`), so the partition's owner
sees all of them and holds the key's bucket alone. The bucket is a GCRA (the generic
cell rate algorithm, a token bucket kept as one number): with the emission interval
``T = 1/R`` (R = ``per_s``) and the burst ``B``, the key's *theoretical arrival time*
``tat`` says when the bucket is full again. A run may start at ``t`` iff

    tat - t <= (B - 1) T,        and then  tat := max(tat, t) + T.

``tat <= t`` is a full bucket (B starts at once); ``tat = t + B T`` is an empty one
(the next start at ``t + T``). Time is kept exactly, in integers: ms x ``per_ks``
(starts per 1,000 s), where ``T`` is ``UNIT`` = 10^6.

**A next owner starts the bucket empty**, and not before the previous owner is known
stopped: a partition adopted at ``t0`` makes each key's bucket empty at ``t1 = t0 +
LeaseRules.adoption_wait_ms`` (the instant from which a concurrency key's
runs start too, §8.2):
``tat = t1 + B T``, the first start at ``t1 + T``. The bucket is nowhere else: nothing
is written, nothing is read back, and a failover can only make it emptier, never full.

*The premise:* an owner starts nothing of the partition at or after ``t1``. An owner
that is still heard by the group learns of a rebalance at its next heartbeat, within
a heartbeat interval (a third of ``lease_loss_ms``), and drops the partition; Kafka's
eager protocol even has it revoke before the new assignment is made. An owner cut
off from the group stops by its lease rule ``lease_loss_ms`` after its last
successful heartbeat, which came before its partitions could be given away (§8); one
in a rebalance whose SyncGroup answer is lost stops at the end of its hold,
``rebalance_hold_ms`` after that heartbeat. A
frozen process (SIGSTOP) is held to it too: once its time is past its lease it starts
nothing, even in a turn handled before the one that declares the lease lost
(`WorkerCore._fill`); only a freeze between a start's decision and the job's actual
start escapes it, as for every lease.

**The bound.** Under the premise, the runs of a key started by the partition's owners
number at most ``R + B`` within any 1 s window, across any number of handovers.

*Lemma 1 (one owner).* If starts ``s_1 <= ... <= s_n`` of one bucket all conform,
``s_n - s_1 >= (n - B) T``. Each start adds at least ``T`` to ``tat`` and leaves it at
least ``s_1 + T`` after the first, so before the n-th start ``tat >= s_1 + (n - 1) T``;
the n-th conforms, so ``s_n >= tat - (B - 1) T >= s_1 + (n - B) T``. Hence a window of
length ``d`` holds at most ``B + R d`` starts of one owner.

*Lemma 2 (an adoption).* From ``tat_0 = t1 + B T``, the same chain gives
``s_n >= t1 + B T + (n - 1) T - (B - 1) T = t1 + n T``: at most ``R (s - t1)`` starts
in ``[t1, s]``, and none before ``t1``.

*Theorem.* Take a window ``[a, a + 1 s]`` holding the switch ``t1`` from an old owner to
a new one (with none inside it, Lemma 1 with ``d = 1 s`` gives ``B + R``). The old
owner's starts there are in ``[a, t1)``: at most ``B + R (t1 - a)`` (Lemma 1); the new
owner's are in ``[t1, a + 1 s]``: at most ``R (a + 1 s - t1)`` (Lemma 2). Together at
most ``B + R``. Several handovers inside one window only shorten each owner's share
(each new owner's count is Lemma 2's, from its own ``t1``). Starting empty is what
lets the premise be "nothing from ``t1`` on" rather than "nothing in the last second
before ``t1``". A bucket kept only in a worker's memory (a new owner's full, from its
adoption on, the simulation's broken variant ``rate-adoption-full``) allows ``B +
R (a + 1 s - t0)`` more on top of whatever the previous owner still starts until it
learns of the rebalance: up to ``2B + 2R`` in a second.
``tests/worker/test_worker_ratelimit.py`` checks both lemmas and the theorem on
random start sequences.

**Pauses.** ``{ns}.ratelimits`` (compacted, one partition, read whole by every worker,
`actors/worker/ratelimit_follower.py`) holds each paused key; a run of a paused key
waits, its deadline still applies, and a pause ``until`` an instant ends by itself
then. Until the worker has read the topic to its end once (`known`), no rate-limited
run starts: a pause written before the worker started is never missed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topics.messages import Run
from topics.ratelimits import RATE_WAIT_ERROR, PauseState, RateLimit, decode_pause_value
from topics.timefmt import format_ms

UNIT = 1_000_000
"""One emission interval in the bucket's scaled time (ms x per_ks): T = 10^6 / per_ks ms."""
FOREVER = 1 << 62
""""No instant by itself": a run that waits for a resume (or for the pauses to be known)."""
_MAX_BUCKETS = 4096  # full buckets are forgotten past this many (a new one is never fuller)


@dataclass(slots=True)
class _Bucket:
    tat: int  # ms x per_ks
    per_ks: int


class RateGate:
    """The buckets of the keys on this worker's partitions, and the keys' pauses."""

    __slots__ = ("_buckets", "_full_on_adoption", "_pauses", "_start_ms", "due_ms", "known")

    def __init__(self, *, adoption_full: bool = False, known: bool = True) -> None:
        # partition -> the instant its keys' buckets are made from (`adopted`)
        self._start_ms: dict[int, int] = {}
        self._buckets: dict[tuple[int, str], _Bucket] = {}
        self._pauses: dict[str, PauseState] = {}
        # Only the simulation's broken variant sets it: a new owner's bucket full.
        self._full_on_adoption = adoption_full
        self.known = known
        """Whether the pauses have been read to the topic's end once (see the module)."""
        self.due_ms: int | None = None
        """When a held run may start or time out (the core's `advance` fills then)."""

    # --- partitions --------------------------------------------------------------------

    def adopted(self, partition: int, now_ms: int, empty_from_ms: int | None = None) -> None:
        """``partition`` is ours from ``now_ms``: its keys' buckets are empty at
        ``empty_from_ms`` (default ``now_ms``; the core gives the instant the previous
        owner is known stopped, see the module), the first start one interval later.
        The broken variant's buckets are full at ``now_ms`` instead."""
        self._start_ms[partition] = (
            now_ms
            if self._full_on_adoption
            else (now_ms if empty_from_ms is None else max(now_ms, empty_from_ms))
        )
        for slot in [slot for slot in self._buckets if slot[0] == partition]:
            del self._buckets[slot]

    def time_moved(self, moved_ms: int) -> None:
        """The worker's time moved ``moved_ms`` off the monotonic clock
        (`WorkerCore.time_moved`): the buckets move with it, so a clock stepped forward
        (or raised to the broker's) adds no token, and one stepped back takes none."""
        for partition, start_ms in self._start_ms.items():
            self._start_ms[partition] = start_ms + moved_ms
        for bucket in self._buckets.values():
            bucket.tat += moved_ms * bucket.per_ks
        self.due_ms = 0  # held runs are judged again at once

    def revoked(self, partition: int) -> None:
        self._start_ms.pop(partition, None)
        for slot in [slot for slot in self._buckets if slot[0] == partition]:
            del self._buckets[slot]

    # --- pauses ------------------------------------------------------------------------

    def learn(self, key: str, value: bytes | None) -> None:
        """A ``{ns}.ratelimits`` record (None: resumed), in offset order. A record that
        cannot be read is taken as a pause: it was written as one (`RatePause.value`)."""
        if value is None:
            self._pauses.pop(key, None)
        else:
            try:
                self._pauses[key] = decode_pause_value(value, key)
            except (ValueError, KeyError, TypeError):
                self._pauses[key] = PauseState(None, "unreadable pause record", 0)
        self.due_ms = 0  # held runs are judged again at once

    def pauses_known(self) -> None:
        """The topic was read to its end: rate-limited runs may start."""
        if not self.known:
            self.known = True
            self.due_ms = 0

    def paused(self, key: str, now_ms: int) -> PauseState | None:
        pause = self._pauses.get(key)
        return pause if pause is not None and pause.holds(now_ms) else None

    def pauses(self) -> dict[str, PauseState]:
        return dict(self._pauses)

    # --- starts ------------------------------------------------------------------------

    def take(self, partition: int, limit: RateLimit, now_ms: int) -> int | None:
        """May a run of ``limit``'s key start on ``partition`` now? None: yes, and its
        token is taken; otherwise the instant from which to ask again (`FOREVER`: only
        a resume, or the pauses becoming known, can let it start)."""
        if not self.known:
            return FOREVER
        pause = self._pauses.get(limit.key)
        if pause is not None and pause.holds(now_ms):
            return FOREVER if pause.until_ms is None else pause.until_ms
        per_ks = limit.per_ks
        slot = (partition, limit.key)
        bucket = self._buckets.get(slot)
        if bucket is None:
            start_ms = self._start_ms.get(partition, now_ms)
            empty = 0 if self._full_on_adoption else limit.burst * UNIT
            bucket = _Bucket(start_ms * per_ks + empty, per_ks)
            if len(self._buckets) >= _MAX_BUCKETS:
                self._forget_full(now_ms)
            self._buckets[slot] = bucket
        elif bucket.per_ks != per_ks:  # schedules disagree on the rate: rescale, rounding up
            bucket.tat = -((-bucket.tat * per_ks) // bucket.per_ks)
            bucket.per_ks = per_ks
        now_scaled = now_ms * per_ks
        allowance = (limit.burst - 1) * UNIT
        if bucket.tat - now_scaled <= allowance:
            bucket.tat = max(bucket.tat, now_scaled) + UNIT
            return None
        return -((allowance - bucket.tat) // per_ks)  # ceil((tat - allowance) / per_ks)

    def hold(self, until_ms: int) -> None:
        """A run held until ``until_ms`` (its next chance, or its deadline)."""
        if self.due_ms is None or until_ms < self.due_ms:
            self.due_ms = until_ms

    def timeout_error(self, run: Run, now_ms: int) -> dict[str, str]:
        """The error of a run whose deadline came while it waited for its key."""
        limit = run.job.rate_limit
        assert limit is not None
        pause = self.paused(limit.key, now_ms)
        if pause is not None:
            until = "resumed" if pause.until_ms is None else format_ms(pause.until_ms)
            why = f"rate-limit key {limit.key!r} is paused until {until}"
            if pause.note:
                why += f" ({pause.note})"
        elif not self.known:
            why = "the rate-limit pauses ({ns}.ratelimits) were not read yet"
        else:
            why = f"rate-limit key {limit.key!r} allows {limit.per_s:g}/s (burst {limit.burst})"
        return {
            "type": RATE_WAIT_ERROR,
            "message": f"run {run.run_id} attempt {run.attempt} reached its deadline"
            f" {format_ms(run.deadline_ms)} before it could start: {why}",
        }

    def waiting(self, runs: Iterable[Run], now_ms: int) -> tuple[int, int]:
        """Of ``runs`` (the queued ones), how many wait for a paused key and how many
        for a rate-limited key's bucket (a view: nothing is taken)."""
        paused = limited = 0
        for run in runs:
            limit = run.job.rate_limit
            if limit is None:
                continue
            if not self.known or self.paused(limit.key, now_ms) is not None:
                paused += 1
                continue
            limited += 1
        return paused, limited

    def _forget_full(self, now_ms: int) -> None:
        for slot, bucket in list(self._buckets.items()):
            if bucket.tat <= now_ms * bucket.per_ks:
                del self._buckets[slot]
