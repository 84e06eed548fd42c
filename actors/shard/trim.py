"""The last line of defence against a changelog record the broker refuses.

A schedule's changelog record is bounded part by part (see `actors.shard.core`,
"Bounds"), and the definition comes on top; a record above `CHANGELOG_MAX_BYTES`
would fail the whole transaction, and the rebuilt shard would retry the same batch
forever. So before a batch's changelog records are kept, each schedule whose
record is over the bound is trimmed here until it fits (`Trimming.fit`).

This is the one step of a flush that changes state; serialisation (`ShardCore._flush`)
only reads it. A flush serialises the batch's changelog; when a record is over the
bound, that pass is not kept: every schedule it names is trimmed, then the batch is
serialised again from the trimmed state (a trimmed schedule writes its full
record, which is what the trimming measured). The records trimming writes
(``skipped`` and ``cancelled`` results, the rejection) so come before the batch's
changelog records, in the same transaction; before this was its own step they came
between two schedules' records, which no reader can tell apart. A schedule deleted
by the trimming writes its tombstone alone (its definition's own record, if not
written yet, is not written first only to be tombstoned after).
"""

from __future__ import annotations

from actors.shard.batch import Batch, Definitions
from actors.shard.retired import Retired
from actors.shard.runs import RunBook
from actors.shard.state import RunState, ScheduleState, encode_schedule
from actors.wheel import TimingWheel

__all__ = ["CHANGELOG_MAX_BYTES", "Trimming"]

# The largest changelog record the core writes: half of Kafka's default
# max.message.bytes (1 MiB), so a batch's framing, headers and compression never
# push it over.
CHANGELOG_MAX_BYTES = 512 * 1024

_WHY = "its schedule's state was trimmed"


class Trimming:
    """Makes an oversized schedule's changelog record fit, writing into the batch."""

    def __init__(
        self,
        batch: Batch,
        schedules: dict[str, ScheduleState],
        wheel: TimingWheel[ScheduleState | RunState],
        definitions: Definitions,
        runs: RunBook,
        retired: Retired,
    ) -> None:
        self._batch = batch
        self._schedules = schedules
        self._wheel = wheel
        self._definitions = definitions
        self._runs = runs
        self._retired = retired

    def fit(self, state: ScheduleState, size: int, now_ms: int) -> bool:
        """Trim ``state``, whose record would be ``size`` bytes, until its full record
        fits `CHANGELOG_MAX_BYTES`; False if it had to be deleted instead.

        In steps, each giving up less than the next: the outcomes of attempts (each
        run keeps its last), the memory of dead runs, the buffered occurrences
        (reported ``skipped``), the runs in flight (reported ``cancelled``; their
        later results are ignored). A ``{ns}.rejected`` record says what happened.
        The schedule keeps firing. If even that does not fit (a definition or DAG
        state that large), the schedule is deleted: the batch then writes its
        tombstone.
        """
        runs = self._runs
        steps: list[str] = []

        def fits() -> bool:
            return len(encode_schedule(state)) <= CHANGELOG_MAX_BYTES

        for run in state.runs.values():
            run.outcomes = [
                {**o, "error": {"type": "Trimmed", "message": "cut: record too large"}}
                for o in run.outcomes[-1:]
            ]
        steps.append("kept only the last attempt outcome of each run")
        if not fits() and state.dead:
            state.dead.clear()
            steps.append("forgot its dead-lettered runs (dlq.replay no longer knows them)")
        if not fits() and state.buffered:
            for scheduled_ms in state.buffered:
                runs.skipped(state, scheduled_ms, "Oversized", _WHY)
            runs.unbuffered(state, len(state.buffered))
            state.buffered.clear()
            steps.append("reported its buffered occurrences skipped")
        if not fits() and state.dag is None and state.runs:
            for run in list(state.runs.values()):
                runs.cancel_run(state, run, now_ms, why=_WHY)
            steps.append("cancelled its runs in flight")
        deleted = not fits()
        if deleted:
            self._wheel.cancel(state)
            runs.forget_runs(state, now_ms)
            del self._schedules[state.id]
            self._definitions.drop(state.def_bytes)
            self._batch.dirty[state.id] = None  # its tombstone
            # As a delete: upserted again, it starts after what it handled.
            self._retired.retire(state.id, state.handled_ms(), state.grace_ms(), now_ms)
            steps.append("deleted it: even so it did not fit; upsert it again, smaller")
        self._batch.out.append(
            self._batch.rejected_changelog(
                state.key,
                f"the changelog record of schedule {state.id!r} would have been "
                f"{size} bytes, above the bound of {CHANGELOG_MAX_BYTES}; the shard "
                f"{'; '.join(steps)}. Runs pile up when workers are down or a retry "
                "policy allows many attempts: look at its results",
            )
        )
        return not deleted
