"""Rate limits in the worker (docs/DESIGN.md §8.5): the bucket's bound through an
adoption, proved in `actors/worker/ratelimit.py` and checked here on random start
sequences, and the core holding, starting and timing out a key's runs."""

from __future__ import annotations

import random

from actors.worker.core import StartJob, WorkerCore
from actors.worker.ratelimit import FOREVER, RateGate
from tests.kit.worker import heard
from topics.command_types import Job
from topics.concurrency import Concurrency
from topics.messages import idempotency_key, parse_result, run_id_for, run_value
from topics.names import TopicKind
from topics.ratelimits import RateLimit, RatePause
from topics.records import InRecord
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
LIMIT = RateLimit("payments", 4, 3)  # 4 a second, bursts of 3: T = 250 ms


def most_in_a_second(starts: list[int]) -> int:
    """The most starts within any closed 1 s window."""
    starts = sorted(starts)
    most, last = 0, 0
    for first in range(len(starts)):
        while last + 1 < len(starts) and starts[last + 1] <= starts[first] + 1000:
            last += 1
        most = max(most, last - first + 1)
    return most


def greedy(gate: RateGate, partition: int, limit: RateLimit, times: list[int]) -> list[int]:
    """Start whenever the gate lets a run through, trying at each of ``times``."""
    return [t for t in times if gate.take(partition, limit, t) is None]


def test_lemma_1_one_owner_never_above_burst_plus_rate_in_a_second() -> None:
    rng = random.Random(1)
    for _ in range(200):
        limit = RateLimit("k", rng.choice([0.5, 1, 3, 7.5, 20]), rng.randint(1, 8))
        gate = RateGate()
        gate.adopted(0, T0 - 60_000)  # long owned: the bucket is full by T0
        times = sorted(T0 + rng.randint(0, 20_000) for _ in range(rng.randint(1, 400)))
        started = greedy(gate, 0, limit, times)
        assert most_in_a_second(started) <= limit.per_s + limit.burst


def test_lemma_2_a_new_owner_starts_at_most_rate_times_elapsed() -> None:
    rng = random.Random(2)
    for _ in range(200):
        limit = RateLimit("k", rng.choice([0.5, 1, 3, 20]), rng.randint(1, 8))
        gate = RateGate()
        gate.adopted(0, T0)
        times = sorted(T0 + rng.randint(0, 5_000) for _ in range(rng.randint(1, 200)))
        started = greedy(gate, 0, limit, times)
        for n, at in enumerate(started, start=1):
            assert n <= limit.per_s * (at - T0) / 1000, (n, at - T0, limit)


def _handover(rng: random.Random, full: bool) -> tuple[int, RateLimit]:
    """The old owner starts greedily until the adoption at ``t0`` (nothing after), the
    new one greedily from then: the most starts in any second around the handover."""
    limit = RateLimit("k", rng.choice([1, 2, 5]), rng.randint(2, 8))
    old, new = RateGate(), RateGate(adoption_full=full)
    old.adopted(0, T0 - 60_000)
    t0 = T0 + rng.randint(0, 3_000)
    new.adopted(0, t0)
    times = sorted(T0 + rng.randint(0, 6_000) for _ in range(rng.randint(20, 300)))
    started = greedy(old, 0, limit, [t for t in times if t < t0])
    started += greedy(new, 0, limit, [t for t in times if t >= t0])
    return most_in_a_second(started), limit


def test_the_theorem_an_adoption_never_lets_more_than_rate_plus_burst_in_a_second() -> None:
    rng = random.Random(3)
    for _ in range(300):
        most, limit = _handover(rng, full=False)
        assert most <= limit.per_s + limit.burst


def test_a_new_owner_starting_full_breaks_the_bound() -> None:
    """The old owner's burst just before the handover, and the runs it was running
    delivered again to the new owner at once: full, the new bucket lets a second burst
    through within the same second; empty, one run per interval."""
    limit = RateLimit("k", 2, 6)
    t0 = T0 + 10_000
    for full, expected in ((True, 6 + 6 + 1), (False, 6 + 1)):
        old, new = RateGate(), RateGate(adoption_full=full)
        old.adopted(0, T0)
        new.adopted(0, t0)
        started = greedy(old, 0, limit, [t0 - 100] * 6)
        started += greedy(new, 0, limit, [t0 + ms for ms in range(0, 900, 10) for _ in range(6)])
        assert most_in_a_second(started) == expected
        assert (expected > limit.per_s + limit.burst) is full


def test_a_revoked_and_readopted_partition_starts_its_buckets_empty_again() -> None:
    gate = RateGate()
    gate.adopted(0, T0)
    limit = RateLimit("k", 1, 5)
    assert gate.take(0, limit, T0 + 60_000) is None  # full after a minute
    gate.revoked(0)
    gate.adopted(0, T0 + 60_000)
    assert gate.take(0, limit, T0 + 60_000) == T0 + 61_000  # empty: the first at +T


def test_a_rate_with_decimals_is_exact() -> None:
    gate = RateGate()
    gate.adopted(0, T0)
    limit = RateLimit("k", 0.3, 1)  # one every 3,333.3 ms
    assert gate.take(0, limit, T0) == T0 + 3334  # rounded up, never early
    assert gate.take(0, limit, T0 + 3334) is None
    assert gate.take(0, limit, T0 + 3335) == T0 + 6668


def test_pauses_hold_until_their_instant_and_unknown_pauses_hold_everything() -> None:
    gate = RateGate(known=False)
    gate.adopted(0, T0 - 60_000)
    assert gate.take(0, LIMIT, T0) == FOREVER
    gate.pauses_known()
    gate.learn("payments", RatePause("payments", until_ms=T0 + 5_000).value(T0))
    assert gate.take(0, LIMIT, T0) == T0 + 5_000
    assert gate.take(0, RateLimit("other", 1, 1), T0) is None
    assert gate.take(0, LIMIT, T0 + 5_000) is None  # the pause ended by itself
    gate.learn("payments", RatePause("payments").value(T0))
    assert gate.take(0, LIMIT, T0 + 10_000) == FOREVER
    gate.learn("payments", None)  # resumed
    assert gate.take(0, LIMIT, T0 + 10_000) is None


# --- the core --------------------------------------------------------------------------


def limited(
    offset: int,
    limit: RateLimit = LIMIT,
    deadline_ms: int = T0 + 600_000,
    concurrency: Concurrency | None = None,
) -> InRecord:
    sid = f"s{offset}"
    run_id = run_id_for(sid, T0)
    value = run_value(
        run_id=run_id,
        schedule_id=sid,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0,
        attempt=1,
        job=Job("noop", {}, concurrency=concurrency, rate_limit=limit),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=deadline_ms,
    )
    return InRecord(TopicKind.RUNS, 0, offset, sid.encode(), value)


def plain(offset: int) -> InRecord:
    sid = f"p{offset}"
    run_id = run_id_for(sid, T0)
    value = run_value(
        run_id=run_id,
        schedule_id=sid,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0,
        attempt=1,
        job=Job("noop", {}),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=T0 + 600_000,
    )
    return InRecord(TopicKind.RUNS, 0, offset, sid.encode(), value)


def core(adopted_ms: int = T0 - 60_000, full: bool = False) -> WorkerCore:
    made = WorkerCore(
        worker="w1",
        concurrency=50,
        known_job=lambda n: n == "noop",
        now_ms=adopted_ms,
        lease_loss_ms=3_000,
        rate_adoption_full=full,
    )
    made.assign(0, 0, None, adopted_ms)
    heard(made, max(adopted_ms, T0))  # the group's heartbeats answered up to T0
    return made


def starts(actions: list[object]) -> list[int]:
    return [a.key[1] for a in actions if isinstance(a, StartJob)]


def tick(worker: WorkerCore, now_ms: int) -> list[object]:
    """Time passes with the group's heartbeats answered (the lease holds)."""
    return list(worker.advance(heard(worker, now_ms)))


def test_a_burst_then_one_per_interval_woken_by_advance() -> None:
    worker = core()
    out: list[object] = []
    for offset in range(6):
        out += worker.receive(limited(offset), T0)
    assert starts(out) == [0, 1, 2]  # the burst
    assert worker.next_due_ms(lease=False) == T0 + 250
    assert starts(tick(worker, T0 + 249)) == []
    assert starts(tick(worker, T0 + 250)) == [3]
    assert starts(tick(worker, T0 + 500)) == [4]
    assert starts(tick(worker, T0 + 750)) == [5]


def test_runs_without_a_rate_limit_are_not_held_behind_a_waiting_key() -> None:
    worker = core()
    out: list[object] = []
    for offset in range(5):
        out += worker.receive(limited(offset), T0)
    out += worker.receive(plain(5), T0)
    assert starts(out) == [0, 1, 2, 5]


def test_a_new_owner_starts_its_buckets_empty_once_the_old_owner_is_known_stopped() -> None:
    worker = core(adopted_ms=T0)  # lease_loss_ms 3 s: the old owner has stopped by then
    out: list[object] = []
    for offset in range(4):
        out += worker.receive(limited(offset), T0)
    assert starts(out) == []
    assert worker.next_due_ms(lease=False) == T0 + 3_000 + 250
    assert starts(tick(worker, T0 + 3_249)) == []
    assert starts(tick(worker, T0 + 3_250)) == [0]  # empty: one interval, no burst
    assert starts(tick(worker, T0 + 3_500)) == [1]
    broken = core(adopted_ms=T0, full=True)  # a bucket in memory: full, at once
    out = []
    for offset in range(4):
        out += broken.receive(limited(offset), T0)
    assert starts(out) == [0, 1, 2]


def test_a_paused_key_waits_and_starts_when_its_pause_ends() -> None:
    worker = core()
    worker.rates.learn("payments", RatePause("payments", until_ms=T0 + 10_000).value(T0))
    assert starts(worker.receive(limited(0), T0)) == []
    assert worker.rates.waiting(worker.queued_runs(), T0) == (1, 0)
    assert worker.next_due_ms(lease=False) == T0 + 10_000
    assert starts(tick(worker, T0 + 10_000)) == [0]


def test_a_resume_starts_the_held_runs_at_the_next_tick() -> None:
    worker = core()
    worker.rates.learn("payments", RatePause("payments").value(T0))
    assert starts(worker.receive(limited(0), T0)) == []
    assert worker.next_due_ms(lease=False) == T0 + 600_000  # its deadline, no sooner
    worker.rates.learn("payments", None)
    assert worker.next_due_ms(lease=False) == 0  # at once
    assert starts(tick(worker, T0 + 1)) == [0]


def test_a_waiting_runs_deadline_still_applies() -> None:
    worker = core()
    worker.rates.learn("payments", RatePause("payments", note="provider down").value(T0))
    assert starts(worker.receive(limited(0, deadline_ms=T0 + 5_000), T0)) == []
    assert worker.next_due_ms(lease=False) == T0 + 5_000
    assert starts(tick(worker, T0 + 5_000)) == []
    commit = worker.take_commit(0)
    assert commit is not None and commit.offset == 1
    result = parse_result(commit.results[0].value or b"")
    assert result.status == RunStatus.TIMED_OUT
    assert result.error is not None and result.error["type"] == "Timeout"
    assert "paused" in result.error["message"] and "provider down" in result.error["message"]


def test_no_rate_limited_run_starts_before_the_pauses_are_known() -> None:
    worker = core()
    worker.rates.known = False
    assert starts(worker.receive(limited(0), T0)) == []
    assert starts(worker.receive(plain(1), T0)) == [1]
    worker.rates.pauses_known()
    assert starts(tick(worker, T0 + 1)) == [0]


def test_a_key_with_a_concurrency_limit_and_a_rate_keeps_both() -> None:
    worker = core()
    both = Concurrency("payments", 1)
    out: list[object] = []
    for offset in range(3):
        out += worker.receive(limited(offset, concurrency=both), heard(worker, T0 + 3_000))
    assert starts(out) == [0]  # the concurrency limit, though the bucket holds 3
