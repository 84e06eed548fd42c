"""Pausing with a note, an end and after the current run: the rules, in one place.

`ScheduleCommands.pause` and the run book share these (a pause ``after_current``
takes effect when the run book ends the last run in flight; a pause ``until``
ends when the wheel hands the schedule back at that instant):

- A pause stops firing at once. With ``after_current`` and a run in flight it is
  ``pending`` until no run is: nothing new starts meanwhile (as with any pause, the
  runs in flight and their retries go on), and ``ls`` says "pausing after the
  current run" rather than "paused" until the last one has ended.
- A pause ``until`` T arms the schedule on the wheel at T. When it comes due the
  schedule resumes by itself, once: the resume is a change of its state, written
  in the same transaction as anything it fires, so a new owner after a failover
  either restores it paused (and arms T again, or resumes at once if T has passed)
  or resumed. What came due while paused is then handled by the misfire policy,
  as after a takeover (a manual ``schedule.resume`` reports it skipped instead).
"""

from __future__ import annotations

from actors.shard.state import PauseInfo, RunState, ScheduleState
from actors.wheel import TimingWheel


def pause_now(
    state: ScheduleState,
    info: PauseInfo | None,
    wheel: TimingWheel[ScheduleState | RunState],
    *,
    pending: bool = False,
) -> None:
    """Stop firing ``state`` now; arm its ``until``, if any. A pause that says nothing
    more (no note, end, author, nor a wait for its runs) keeps no `PauseInfo`: its
    record is as it always was."""
    if info is not None:
        info.pending = pending
        if not info.says_more():
            info = None
    state.pause = info
    state.paused = True
    wheel.cancel(state)
    if info is not None and info.until_ms is not None:
        wheel.arm(state, info.until_ms)


def runs_ended(state: ScheduleState) -> bool:
    """The last run in flight ended: a pending pause is now a plain one. True if the
    schedule's record changed."""
    info = state.pause
    if info is None or not info.pending or state._runs:
        return False
    info.pending = False
    if not info.says_more():
        state.pause = None
    return True


def resumes_now(
    state: ScheduleState, now_ms: int, wheel: TimingWheel[ScheduleState | RunState]
) -> bool:
    """A paused schedule came due: True (and unpaused) if its ``until`` has come,
    else False, armed again at its ``until`` if it has one."""
    info = state.pause
    if info is None or info.until_ms is None:
        return False
    if info.until_ms > now_ms:
        wheel.arm(state, info.until_ms)
        return False
    state.paused = False
    state.pause = None
    return True
