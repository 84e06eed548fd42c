"""A shard whose writes the broker refuses (a missing ACL), driven by events alone.

The rules of `actors.scheduler.lifecycle` for a refusal: the shard's attempt is
closed (its transaction never commits), the shard is left alone for a backoff that
doubles up to a bound instead of being rebuilt at once, the refusal is noted when
it starts and then once per interval, and the first committed write after the ACL
is back says so. The real-broker side is in `tests/broker/security/test_security_broker.py`.
"""

from __future__ import annotations

from actors.scheduler.lifecycle import (
    DENIED_BACKOFF_MAX_MS,
    DENIED_NOTE_INTERVAL_MS,
    Action,
    Close,
    Fence,
    Note,
    Pause,
    Probe,
    SchedulerMachine,
    Write,
)
from tests.scheduler.test_scheduler_lifecycle import T0, FakeCore, _live, _of, _sample

SESSION_MS = 10_000
DENIED = "User:s may not Write topic n.runs: Write is granted to role scheduler"


def _denied_notes(actions: list[Action]) -> list[Note]:
    return [n for n in _of(Note, actions) if n.kind == "denied"]


def _refuse_probe(machine: SchedulerMachine, mono_ms: int) -> tuple[list[Action], int]:
    """Let the waiting shard 0 start building at `mono_ms` and have its probe refused."""
    (fence,) = _of(Fence, machine.tick(mono_ms))
    assert machine.fence_done(0, fence.token) == [Probe(0, fence.token)]
    actions = machine.step_failed(
        0, fence.token, fenced=False, error="TopicAuthorizationFailedError", mono_ms=mono_ms,
        denied=DENIED,
    )  # fmt: skip
    return actions, machine.slots[0].not_before_ms


def test_a_refused_write_closes_the_shard_names_the_acl_and_backs_off_to_a_bound() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, rebuild_backoff_ms=1_000)
    _live(machine, 0, FakeCore(due=[T0]))
    (write,) = _of(Write, machine.turn(T0, 0))
    actions = machine.write_failed(
        0, write.token, fenced=False, error="refused", mono_ms=0, denied=DENIED
    )
    assert _of(Close, actions) and _of(Pause, actions)  # aborted, inputs not read
    (note,) = _denied_notes(actions)
    assert DENIED in note.text and "nothing of it is committed" in note.text
    assert machine.live() == {}
    # Not touched before the backoff, then once per backoff, each twice the last.
    assert machine.tick(999) == []
    now_ms, waits = 1_000, []
    notes = 0
    while now_ms < 10 * DENIED_NOTE_INTERVAL_MS:
        actions, not_before_ms = _refuse_probe(machine, now_ms)
        notes += len(_denied_notes(actions))
        waits.append(not_before_ms - now_ms)
        assert machine.tick(not_before_ms - 1) == []
        now_ms = not_before_ms
    assert waits[:4] == [2_000, 4_000, 8_000, 16_000]
    assert max(waits) == DENIED_BACKOFF_MAX_MS == waits[-1]
    # Noted when it started, then at most once per interval, never once per attempt.
    assert notes <= now_ms // DENIED_NOTE_INTERVAL_MS + 1 < len(waits)


def test_a_refusal_note_repeats_after_its_interval_with_the_count_of_refused_attempts() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, rebuild_backoff_ms=1_000)
    _live(machine, 0, FakeCore(due=[T0]))
    (write,) = _of(Write, machine.turn(T0, 0))
    machine.write_failed(0, write.token, fenced=False, error="x", mono_ms=0, denied=DENIED)
    now_ms, texts = 0, []
    while not texts:
        now_ms = machine.slots[0].not_before_ms
        actions, _ = _refuse_probe(machine, now_ms)
        texts = [n.text for n in _denied_notes(actions)]
    assert now_ms >= DENIED_NOTE_INTERVAL_MS
    assert "more times since" in texts[0]


def test_once_the_acl_is_back_the_shard_is_rebuilt_fires_and_says_it_is_authorized() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, rebuild_backoff_ms=1_000)
    _live(machine, 0, FakeCore(due=[T0]))
    (write,) = _of(Write, machine.turn(T0, 0))
    machine.write_failed(0, write.token, fenced=False, error="x", mono_ms=0, denied=DENIED)
    # Rebuilt from the changelog: the restored core still owes the occurrence.
    core = FakeCore(due=[T0])
    token = _live(machine, 0, core, mono_ms=1_000)
    (again,) = _of(Write, machine.turn(T0 + 1_000, 1_000))
    assert again.token == token and len(again.records) == 1
    actions = machine.write_done(0, token, [_sample(T0 + 1_000, 1_000)])
    assert [n.kind for n in _of(Note, actions)] == ["authorized"]
    assert machine.refusals == {}


def test_a_refusal_is_not_a_fence_and_a_fence_is_not_a_refusal() -> None:
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, rebuild_backoff_ms=1_000)
    _live(machine, 0, FakeCore(due=[T0]))
    (write,) = _of(Write, machine.turn(T0, 0))
    actions = machine.write_failed(0, write.token, fenced=True, error="x", mono_ms=0)
    assert not _denied_notes(actions) and machine.refusals == {}
    assert machine.slots[0].not_before_ms == SESSION_MS
