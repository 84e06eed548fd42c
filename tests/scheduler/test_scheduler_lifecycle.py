"""The scheduler's lifecycle machine, driven by events alone (no Kafka, no clock).

Each test states one rule of `actors.scheduler.lifecycle` and several were
failures of the loop before it became a machine: a revocation waiting for a
restore, a stale build landing after a rebalance, an idle shard firing early
after its clock stepped, a run record larger than the runs topic stalling a shard.
"""

from __future__ import annotations

from typing import Any

from actors.scheduler.lifecycle import (
    Action,
    ClockSample,
    Close,
    Fence,
    Note,
    Pause,
    Phase,
    Position,
    Probe,
    Restore,
    SchedulerMachine,
    Write,
)
from topics.command_types import Job
from topics.messages import parse_result, run_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord

SESSION_MS = 10_000
T0 = 1_800_000_000_000


class FakeCore:
    """A core that fires one run record per due instant; enough to watch the machine."""

    def __init__(self, due: list[int] | None = None, run_bytes: int = 10) -> None:
        self.due = sorted(due or [])
        self.applied: list[InRecord] = []
        self.advanced_at: list[int] = []
        self.run_bytes = run_bytes

    def apply(self, record: InRecord, now_ms: int) -> list[OutRecord]:
        self.applied.append(record)
        return [OutRecord(TopicKind.DLQ, record.key, b"dead")] if record.offset == -1 else []

    def advance(self, now_ms: int, max_fires: int | None = None) -> list[OutRecord]:
        self.advanced_at.append(now_ms)
        fired = [d for d in self.due if d <= now_ms][: max_fires or None]
        self.due = self.due[len(fired) :]
        return [OutRecord(TopicKind.RUNS, b"s", _run(d, self.run_bytes)) for d in fired]

    def next_due_ms(self) -> int | None:
        return self.due[0] if self.due else None

    @property
    def stats(self) -> dict[str, Any]:
        return {}


def _run(scheduled_ms: int, arg_bytes: int) -> bytes:
    return run_value(
        run_id=f"s@{scheduled_ms}",
        schedule_id="s",
        task=None,
        scheduled_ms=scheduled_ms,
        fired_ms=scheduled_ms,
        attempt=1,
        job=Job("j", {"blob": "x" * arg_bytes}),
        idempotency_key="k",
        deadline_ms=scheduled_ms + 60_000,
    )


def _sample(local_ms: int, mono_ms: int, ahead_ms: int = 0) -> ClockSample:
    return ClockSample(local_ms, local_ms + 2, local_ms + 1 - ahead_ms, mono_ms, mono_ms + 2)


def _live(machine: SchedulerMachine, p: int, core: FakeCore, mono_ms: int = 0) -> int:
    """Walk shard p from assignment to live; returns its token."""
    actions = machine.assign(sorted(machine.assigned | {p}), mono_ms)
    (fence,) = [a for a in actions if isinstance(a, Fence) and a.partition == p]
    token = fence.token
    assert machine.fence_done(p, token) == [Probe(p, token)]
    assert machine.probe_done(p, token, _sample(T0, mono_ms), mono_ms) == [Restore(p, token)]
    assert machine.restore_done(p, token, core, []) == [Position(p, token)]
    machine.position_done(p, token)
    assert machine.slots[p].phase is Phase.LIVE
    return token


def _of(kind: type, actions: list[Action]) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def test_an_assigned_shard_is_paused_fenced_probed_restored_positioned_then_live() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    actions = machine.assign([3], mono_ms=0)
    assert Pause(3) in actions
    (fence,) = _of(Fence, actions)
    assert machine.slots[3].phase is Phase.FENCING
    assert machine.live() == {}  # nothing is fed before it is live
    assert machine.feed(3, TopicKind.COMMANDS, [], T0) is False
    _ = machine.fence_done(3, fence.token)
    assert machine.slots[3].phase is Phase.PROBING


def test_a_revocation_during_a_restore_closes_the_attempt_and_its_late_result_is_refused() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    (fence,) = _of(Fence, machine.assign([1], mono_ms=0))
    machine.fence_done(1, fence.token)
    machine.probe_done(1, fence.token, _sample(T0, 0), 0)
    # The rebalance lands while the changelog is being read: nothing waits for it.
    actions = machine.revoke([1])
    assert Close(1, fence.token, "revoked while being built") in actions
    assert 1 not in machine.slots
    # The restore finishes afterwards: its result belongs to no attempt any more.
    late = machine.restore_done(1, fence.token, FakeCore(), [])
    assert _of(Close, late) and machine.live() == {}


def test_a_stale_build_event_never_touches_a_newer_attempt() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    (first,) = _of(Fence, machine.assign([0], mono_ms=0))
    machine.revoke([0])
    (second,) = _of(Fence, machine.assign([0], mono_ms=5))
    assert second.token != first.token
    assert _of(Close, machine.fence_done(0, first.token))  # the old producer is closed
    assert machine.slots[0].phase is Phase.FENCING  # the new attempt is untouched
    assert machine.fence_done(0, second.token) == [Probe(0, second.token)]


def test_revocation_parks_a_live_shard_and_giving_it_back_resumes_without_restore() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    core = FakeCore()
    token = _live(machine, 2, core)
    machine.revoke([2])
    assert machine.slots[2].phase is Phase.PARKED
    actions = machine.assign([2], mono_ms=100)
    assert Probe(2, token) in actions and not _of(Fence, actions)
    assert machine.probe_done(2, token, _sample(T0, 100), 100) == [Position(2, token)]
    machine.position_done(2, token)
    assert machine.live() == {2: core}


def test_a_parked_shard_not_given_back_is_closed() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    token = _live(machine, 2, FakeCore())
    machine.revoke([2])
    actions = machine.assign([4], mono_ms=0)
    assert Close(2, token, "revoked, not assigned back") in actions
    assert 2 not in machine.slots


def test_a_fenced_resume_is_built_afresh_at_once() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    token = _live(machine, 2, FakeCore())
    machine.revoke([2])
    machine.assign([2], mono_ms=1_000)
    actions = machine.step_failed(2, token, fenced=True, error="ProducerFenced", mono_ms=1_000)
    assert Close(2, token, _of(Close, actions)[0].why) in actions
    assert machine.slots[2].phase is Phase.WAITING
    (fence,) = _of(Fence, machine.tick(1_000))  # no session-long wait: the group gave it to us
    assert fence.token != token


def test_a_fenced_write_waits_a_session_before_building_again() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    core = FakeCore(due=[T0])
    token = _live(machine, 0, core)
    (write,) = _of(Write, machine.turn(T0, 0))
    actions = machine.write_failed(0, write.token, fenced=True, error="fenced", mono_ms=50)
    assert Close(0, token, "fenced") in actions and Pause(0) in actions
    assert any(isinstance(a, Note) and "ZOMBIE" in a.text for a in actions)
    assert machine.tick(50 + SESSION_MS - 1) == []
    assert _of(Fence, machine.tick(50 + SESSION_MS))


def test_a_failed_write_drops_the_shard_and_rebuilds_after_the_backoff() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, rebuild_backoff_ms=1_000)
    _live(machine, 0, FakeCore(due=[T0]))
    (write,) = _of(Write, machine.turn(T0, 0))
    machine.write_failed(0, write.token, fenced=False, error="refused", mono_ms=10)
    assert machine.live() == {}
    assert machine.tick(500) == []
    assert _of(Fence, machine.tick(1_010))


def test_one_write_per_shard_carries_its_records_and_consumed_offsets() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    core = FakeCore(due=[T0 - 5])
    token = _live(machine, 0, core)
    command = InRecord(TopicKind.COMMANDS, 0, 41, b"s", b"{}", T0)
    assert machine.feed(0, TopicKind.COMMANDS, [command], T0)
    (write,) = _of(Write, machine.turn(T0, 0))
    assert write.token == token and write.offsets == {TopicKind.COMMANDS: 42}
    assert [r.topic for r in write.records] == [TopicKind.RUNS]
    # While that transaction is out, the shard is not turned again; records wait.
    assert _of(Write, machine.turn(T0, 0)) == []
    assert machine.feed(0, TopicKind.RESULTS, [InRecord(TopicKind.RESULTS, 0, 7, b"s", b"{}")], T0)
    machine.write_done(0, token)
    (second,) = _of(Write, machine.turn(T0, 0))
    assert second.offsets == {TopicKind.RESULTS: 8}


def test_a_backlog_goes_out_in_bounded_turns() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, max_fires_per_turn=2)
    token = _live(machine, 0, FakeCore(due=[T0 - 3, T0 - 2, T0 - 1]))
    (first,) = _of(Write, machine.turn(T0, 0))
    assert len(first.records) == 2
    machine.write_done(0, token)
    assert machine.wake_in_ms(T0, 0) == 1  # the rest is due: turn again at once
    (second,) = _of(Write, machine.turn(T0, 0))
    assert len(second.records) == 1


def test_a_clock_step_holds_every_fire_until_a_fresh_probe_measured_the_clock() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, skew_bound_ms=1_000)
    core = FakeCore(due=[T0 + 30_000])
    token = _live(machine, 0, core, mono_ms=0)
    # The wall clock jumps 60 s ahead while the monotonic clock moves 1 s: an idle shard.
    actions = machine.begin_turn(T0 + 61_000, 1_000) + machine.turn(T0 + 61_000, 1_000)
    assert Probe(0, token, refresh=True) in actions
    assert not _of(Write, actions) and core.advanced_at == []  # the due run was NOT fired
    # The probe measures a clock a minute ahead of the broker's: hold back, then fire on time.
    machine.probe_done(0, token, _sample(T0 + 61_000, 1_000, ahead_ms=60_000), 1_000)
    assert machine.skew.holdback_ms() >= 58_000
    assert _of(Write, machine.turn(T0 + 61_000, 1_000)) == []  # true time is T0+1s: not due
    (write,) = _of(Write, machine.turn(T0 + 91_000, 31_000))
    assert len(write.records) == 1


def test_a_sample_whose_round_trip_saw_a_step_is_not_trusted() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, skew_bound_ms=1_000)
    token = _live(machine, 0, FakeCore(due=[T0 + 5_000]))
    stepped = ClockSample(T0, T0 + 30_002, T0 + 1, 0, 2)  # wall moved 30 s, mono 2 ms
    machine.write_done(0, token, [stepped])
    assert not machine.may_fire()
    assert machine.skew.samples_seen == 0


def test_a_runs_topic_without_log_append_time_never_lets_the_shard_fire() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    (fence,) = _of(Fence, machine.assign([0], mono_ms=0))
    machine.fence_done(0, fence.token)
    actions = machine.probe_done(0, fence.token, None, 0)
    assert _of(Close, actions) and machine.slots[0].phase is Phase.WAITING
    assert any(isinstance(a, Note) and "LogAppendTime" in a.text for a in actions)


def test_a_run_larger_than_the_runs_topic_ends_as_a_visible_failure_not_a_stall() -> None:
    machine = SchedulerMachine(
        session_timeout_ms=SESSION_MS, runs_limit_bytes=4_096, runs_topic="ns.runs"
    )
    core = FakeCore(due=[T0 - 1], run_bytes=20_000)
    _live(machine, 0, core)
    actions = machine.turn(T0, 0)
    (write,) = _of(Write, actions)
    topics = [r.topic for r in write.records]
    assert TopicKind.RUNS not in topics  # never written: the batch would be refused whole
    (result,) = [r for r in write.records if r.topic is TopicKind.RESULTS]
    parsed = parse_result(result.value or b"")
    assert parsed.status == "failed" and parsed.error is not None
    assert parsed.error["type"] == "NonRetryable"
    assert "larger than the runs topic accepts" in parsed.error["message"]
    assert TopicKind.DLQ in topics  # the core ended the run as any non-retryable failure
    assert core.applied and core.applied[0].topic is TopicKind.RESULTS
    assert any(isinstance(a, Note) and "max.message.bytes" in a.text for a in actions)


def test_leaving_closes_every_opened_attempt() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS)
    token = _live(machine, 0, FakeCore())
    machine.assign([0, 1], mono_ms=0)
    actions = machine.leave()
    assert {(a.partition, a.token) for a in _of(Close, actions)} >= {(0, token)}
    assert machine.slots == {}


def test_a_trigger_fed_while_a_clock_step_is_unmeasured_waits_for_the_probe() -> None:
    """A command can fire (a trigger fires what is due): it is held, unapplied, with its
    offset, until the clock is measured again; then applied and written as usual."""
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, skew_bound_ms=1_000)
    core = FakeCore()
    token = _live(machine, 0, core)
    actions = machine.begin_turn(T0 + 61_000, 1_000)  # the wall clock jumped a minute
    assert Probe(0, token, refresh=True) in actions
    trigger = InRecord(TopicKind.COMMANDS, 0, 5, b"s", b"{}", T0)
    assert machine.feed(0, TopicKind.COMMANDS, [trigger], T0 + 61_000)
    assert core.applied == []  # not applied on an unmeasured clock
    assert _of(Write, machine.turn(T0 + 61_000, 1_000)) == []
    machine.probe_done(0, token, _sample(T0 + 61_000, 1_000, ahead_ms=60_000), 1_000)
    (write,) = _of(Write, machine.turn(T0 + 61_000, 1_000))
    assert core.applied == [trigger] and write.offsets == {TopicKind.COMMANDS: 6}


def test_a_shard_revoked_while_its_refresh_probe_is_out_is_closed_not_parked() -> None:
    """Parking it would keep a producer a probe still uses and a core ahead of its offsets."""
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, sample_max_age_ms=10)
    token = _live(machine, 0, FakeCore())
    assert Probe(0, token, refresh=True) in machine.begin_turn(T0 + 50, 50)
    actions = machine.revoke([0])
    assert Close(0, token, "revoked while busy") in actions
    assert 0 not in machine.slots
    # The probe's late answer closes nothing current and resumes nothing.
    assert _of(Close, machine.probe_done(0, token, _sample(T0, 60), 60))


def test_a_refresh_probe_that_finds_no_broker_time_drops_the_shard_loudly() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, sample_max_age_ms=10)
    token = _live(machine, 0, FakeCore())
    machine.begin_turn(T0 + 50, 50)
    actions = machine.probe_done(0, token, None, 60)
    assert Close(0, token, _of(Close, actions)[0].why) in actions
    assert any(isinstance(a, Note) and "LogAppendTime" in a.text for a in actions)
    assert machine.slots[0].phase is Phase.WAITING


class _BufferingCore(FakeCore):
    """Ending a run starts the next buffered occurrence, with the same large args."""

    def apply(self, record: InRecord, now_ms: int) -> list[OutRecord]:
        self.applied.append(record)
        if record.offset == -1 and len(self.applied) == 1:
            return [OutRecord(TopicKind.RUNS, b"s", _run(T0, self.run_bytes))]
        return [OutRecord(TopicKind.DLQ, record.key, b"dead")] if record.offset == -1 else []


def test_a_too_large_run_the_core_starts_in_answer_is_ended_too() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, runs_limit_bytes=4_096)
    core = _BufferingCore(due=[T0 - 1], run_bytes=20_000)
    _live(machine, 0, core)
    (write,) = _of(Write, machine.turn(T0, 0))
    assert all(r.topic is not TopicKind.RUNS for r in write.records)
    assert len([r for r in write.records if r.topic is TopicKind.RESULTS]) == 2
    assert len(core.applied) == 2
