"""Runs of one shard: occurrences becoming runs, attempts, retries, timeouts, the DLQ.

`RunBook` is a part of `ShardCore` (same rules: pure, no I/O; the core's entry
points catch what escapes). A run is a `RunState` of its schedule, in flight
from its first attempt until its terminal outcome; this module is its life:

- a schedule's timer comes due (`RunBook.fire_due`, the herd's path): what is due
  fires, or `misfire` decides for a backlog beyond the grace period;
- an occurrence is due: `overlap` decides (start, skip, buffer, cancel the
  others); a start emits attempt 1 to ``{ns}.runs`` with its deadline, and puts
  the deadline plus `TIMEOUT_MARGIN_MS` on the wheel;
- an attempt fails (a worker's ``failed``/``timed_out``, or the shard's own
  ``timed_out`` when the deadline timer pops): `retry` decides between a retry
  timer for attempt n+1 and the DLQ (with every attempt's outcome);
- a run ends (success, cancellation, DLQ): the next buffered occurrence starts.

It also writes the results the shard decides itself (``missed``, ``skipped``,
``cancelled``, ``timed_out``), all with worker ``shard-{p}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import sha256 as _sha256
from typing import Protocol

from actors.shard import overlap
from actors.shard.batch import Batch
from actors.shard.dag_definition import data_interval
from actors.shard.deadlines import DeadlineAlerts, new_watch
from actors.shard.definition import Definition, cached_definition
from actors.shard.delivery import REFUSED_ERROR, Occurrence, target_record
from actors.shard.misfire import Backlog, MissedRange, NextAfter, plan_backlog
from actors.shard.overlap import Decision
from actors.shard.pausing import resumes_now, runs_ended
from actors.shard.retry import backoff_ms, is_final_failure
from actors.shard.state import INSTANT_TEXTS, Placed, RunState, ScheduleState, instant_text
from actors.wheel import TimingWheel
from topics.commands import Job, RetryPolicy
from topics.covers import Covers
from topics.deadlines import TIMEOUT_MARGIN_MS as TIMEOUT_MARGIN_MS
from topics.messages import (
    RETRY_AFTER_FIELD,
    cancel_value,
    dlq_value,
    result_value,
    retry_after_ms,
    run_id_for,
    run_value,
)
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.priority import placement_of
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import placed_by
from topics.records import OutRecord, TargetRecord
from topics.target_patterns import refusal_of
from topics.targets import KAFKA_JOB, KafkaDelivery, TargetTopics
from topics.timefmt import format_ms
from topics.vocabulary import MisfireMode, OverlapPolicy, RunStatus

# An attempt its queue's topic could not take (`RunBook.queue_refused`).
QUEUE_REFUSED_ERROR = "QueueRefused"
# A record's framing in a batch of its own (as `actors.shard.delivery`'s).
QUEUE_FRAMING_BYTES = 128
# An owed cancel record (its queue topic could not take it) is tried again at most this
# often, and no sooner than the topic can have changed (`RunBook.queue_cancel`).
CANCEL_RESEND_MS = 10_000

# When emitting a retry failed (a bug), how long until the shard tries it again.
RETRY_AFTER_ERROR_MS = 60_000

# A run keeps the outcomes of its first and last few attempts (each attempt's
# number is in its outcome), and error text is cut: a run may have up to 1,000
# attempts and a worker's error up to 2,000 characters, and all of it is in the
# schedule's changelog record while the run is in flight (and in its DLQ record).
OUTCOMES_FIRST = 2
OUTCOMES_LAST = 3
ERROR_TEXT_MAX_CHARS = 256
TEXT_MAX_CHARS = 128  # error type, other error fields, worker name
_ERROR_FIELDS_MAX = 4


def bounded_error(error: Mapping[str, str]) -> dict[str, str]:
    """``error`` with at most a few fields and every text cut (marked with "...")."""
    bounded: dict[str, str] = {}
    for name, text in list(error.items())[:_ERROR_FIELDS_MAX]:
        limit = ERROR_TEXT_MAX_CHARS if name == "message" else TEXT_MAX_CHARS
        text = str(text)
        bounded[str(name)[:TEXT_MAX_CHARS]] = (
            text if len(text) <= limit else text[: limit - 3] + "..."
        )
    return bounded


def run_key(run_id: str) -> str:
    """`topics.messages.idempotency_key` of a run id alone, without its generality."""
    data = run_id.encode()
    return _sha256(len(data).to_bytes(4, "big") + data).hexdigest()


_RUNS = TopicKind.RUNS
_RESULTS = TopicKind.RESULTS
_DLQ = TopicKind.DLQ


# A backlog is held whole while the calendars are known this much behind now or more;
# closer (a grace shorter than the follower's lag, a spec denser than it) it is planned
# in parts, or such a schedule could be held for ever.
WHOLE_BACKLOG_SLACK_MS = 5_000


def _backlog_known_in_part(next_after: NextAfter, upto_ms: int, cutoff_ms: int) -> bool:
    """Whether a misfired backlog (instants before ``cutoff_ms``: now less the grace)
    runs past ``upto_ms``, how far the calendars the schedule names are known. Planned
    now, it would be judged in two parts, and run_once or catch_up_max would fire
    once per part; so it waits (fires and reports nothing) until one plan can judge it
    all. docs/DESIGN.md §5.7."""
    if upto_ms >= cutoff_ms or cutoff_ms - upto_ms < WHOLE_BACKLOG_SLACK_MS:
        return False
    following = next_after(upto_ms)
    return following is not None and following < cutoff_ms


class DagTasks(Protocol):
    """What the run book asks of the DAG runs (`dag_shard.DagRuns`, which builds on
    this module): a DAG's occurrence, and its task runs' policies and ends."""

    def occurrence(self, state: ScheduleState, scheduled_ms: int, now_ms: int) -> None: ...
    def dates(
        self, state: ScheduleState, run: RunState
    ) -> tuple[int | None, tuple[int, int] | None]: ...
    def task_policy(self, state: ScheduleState, run: RunState) -> tuple[Job, int, RetryPolicy]: ...
    def task_ended(self, state: ScheduleState, run: RunState, now_ms: int) -> None: ...


class Cancels(Protocol):
    """What the run book asks of the cancels (`cancel.RunCancels`, which builds on
    this module): cancel_other's requests, and a cancelled attempt's deadline."""

    def request_cancel(
        self, state: ScheduleState, run: RunState, reason: str, now_ms: int
    ) -> None: ...
    def cancel_waiting(
        self, state: ScheduleState, run: RunState, reason: str, now_ms: int
    ) -> None: ...
    def cancelled_unconfirmed(self, run: RunState, now_ms: int) -> None: ...


class RunBook:
    """The runs of one shard's schedules, written into its `Batch`.

    It holds the batch's containers and the wheel itself (the herd's path reaches
    each with one attribute lookup). A DAG's task runs and cancelled attempts are
    the DAG runs' and the cancels' business; both are built on the run book, so
    `ShardCore` wires them in once, with `wire`, as the two small interfaces above
    (`DagTasks`, `Cancels`): the modules import downwards only.
    """

    _dags: DagTasks
    _cancels: Cancels

    def __init__(
        self, batch: Batch, wheel: TimingWheel[ScheduleState | RunState], *, worker: str
    ) -> None:
        self._out = batch.out
        self._dirty = batch.dirty
        self._counts = batch.counts
        self._late_ms = batch.late_ms
        self._wheel = wheel
        self.partition = batch.partition
        self.worker = worker  # the name on the results the shard writes itself
        self.in_flight = 0  # runs in flight over all schedules
        # The allowed Kafka target topics as the runtime last saw them (`delivery`).
        self.targets = TargetTopics()
        self.alerts = DeadlineAlerts(batch.out, batch.counts)

    def wire(self, dags: DagTasks, cancels: Cancels) -> None:
        self._dags = dags
        self._cancels = cancels

    def fire_due(self, state: ScheduleState, now_ms: int, until_ms: int | None = None) -> None:
        """The schedule's timer came due: fire what is due by ``now_ms`` (the misfire
        policy decides for a backlog beyond the grace period). ``until_ms``: handle no
        instant later than it (the calendars a schedule names are known as of then,
        docs/DESIGN.md §5.7); what lies between it and ``now_ms`` stays due."""
        if state.paused:
            if not resumes_now(state, now_ms, self._wheel):
                return
            self._dirty[state.id] = state  # resumed by itself at its ``until``
            self.drain_buffer(state, now_ms)
        first_ms = state.next_ms
        if first_ms is None:
            return
        # Whatever happens below (an error in the middle included), the schedule is
        # written and re-armed, and ``next_ms`` is past every occurrence handled:
        # an occurrence is never handled twice, the schedule never stops firing.
        try:
            definition = state._definition  # `state.definition`, but for its first use
            if definition is None:  # restored: most share a definition already built
                definition = cached_definition(state.def_bytes)
                if definition is None:
                    definition = state.definition
                else:
                    state._definition = definition
            next_after = definition.compiled.next_after
            limited = definition.max_runs is not None
            upto_ms = now_ms if until_ms is None else min(now_ms, until_ms)
            if first_ms >= now_ms - definition.grace_ms:  # the steady state: all within grace
                o: int | None = first_ms
                late_ms = self._late_ms
                while o is not None and o <= upto_ms:
                    late_ms.append(now_ms - o)
                    state.next_ms = following = next_after(o)
                    if state._runs or state.dag is not None:
                        self.occurrence(state, o, now_ms)
                    else:  # the common case, without an overlap decision
                        self._start_run(state, o, now_ms, definition)
                    o = following
                    if limited and state.completed is not None:
                        break  # its last run: nothing more fires
            elif _backlog_known_in_part(next_after, upto_ms, now_ms - definition.grace_ms):
                pass  # held whole (see there): ``next_ms`` stays, the core tries again
            else:
                misfire = definition.misfire
                plan = plan_backlog(
                    next_after,
                    first_ms,
                    upto_ms,
                    # Older than the grace is judged by now; an instant past ``upto_ms``
                    # is neither fired nor reported (it is not known to be allowed yet).
                    cutoff_ms=min(now_ms - definition.grace_ms, upto_ms + 1),
                    policy=misfire.policy,
                    catch_up_max=misfire.catch_up_max,
                )
                state.next_ms = plan.next_ms
                self._report_missed(state, plan, misfire.policy, misfire.grace_s)
                self._counts["late_fired_total"] += plan.late_fires
                for o in plan.fire:
                    self.occurrence(state, o, now_ms)
                    if limited and state.completed is not None:
                        break  # its last run: nothing more fires
        finally:
            if not state.paused and state.next_ms is not None:  # armed again
                self._wheel.arm(state, state.next_ms)
            elif state.next_ms is None and state.completed is None:
                state.completed = "end"  # its spec has nothing after (an end, a one-off)
            self._dirty[state.id] = state

    def time_out(self, run: RunState, now_ms: int) -> None:
        if run.cancel_reason is not None:
            placed = run.placed
            if (
                placed is not None
                and placed.cancel_owed is not None
                and now_ms < run.deadline_ms + TIMEOUT_MARGIN_MS
            ):  # its cancel record still waits for its queue topic
                self.resend_cancel(run, now_ms)
                return
            # Cancelled and no worker said so: it is over.
            self._cancels.cancelled_unconfirmed(run, now_ms)
            return
        state = run.schedule
        error = {
            "type": "TimedOut",
            "message": f"no result for attempt {run.attempt} by its deadline "
            f"{format_ms(run.deadline_ms)} plus {TIMEOUT_MARGIN_MS // 1000} s; "
            "the shard counts it as timed out",
        }
        self.run_result(run, RunStatus.TIMED_OUT, now_ms, error)
        self._counts["timed_out_total"] += 1
        self.attempt_failed(state, run, now_ms, RunStatus.TIMED_OUT, error, self.worker)
        self._dirty[state.id] = state

    def next_attempt(self, run: RunState, now_ms: int) -> None:
        state = run.schedule
        try:
            run.attempt += 1
            try:
                refused = self._emit_attempt(state, run, now_ms)
            except BaseException:
                run.attempt -= 1  # not emitted: the same attempt is tried again later
                raise
            self._counts["retries_total"] += 1
            if refused is not None:
                self.queue_refused(state, run, now_ms, refused)
        finally:
            if not run.pending and (state._runs or {}).get(run.run_id) is run:
                self._wheel.arm(run, now_ms + RETRY_AFTER_ERROR_MS)  # never stuck
            self._dirty[state.id] = state

    def occurrence(self, state: ScheduleState, scheduled_ms: int, now_ms: int) -> None:
        """One occurrence (or trigger) is due now: fire it, or what overlap says."""
        if not state._runs and state.dag is None:  # the common case, without a decision
            self._start_run(state, scheduled_ms, now_ms)
            return
        if state.dag is not None:  # a DAG run (max_active_runs instead of overlap)
            self._dags.occurrence(state, scheduled_ms, now_ms)
            return
        policy = state.definition.overlap
        live = _live_runs(state)  # a backfill's runs are not the live schedule's
        running = len(live)
        waiting = len(state.buffered_or_none or ())  # read without making an Aside
        decision = overlap.decide(policy, in_flight=bool(running), waiting=waiting, running=running)
        if decision == Decision.START:
            self._start_run(state, scheduled_ms, now_ms)
        elif decision == Decision.DROP:
            why = "a run of it was still in flight"
            if policy == OverlapPolicy.ALLOW:
                why = (
                    f"{running} runs of it were in flight, the most overlap allow starts "
                    f"({overlap.ALLOW_MAX_IN_FLIGHT}); are its workers down?"
                )
            self.skipped(state, scheduled_ms, "Overlap", why)
        elif decision == Decision.BUFFER:
            state.buffered.append(scheduled_ms)
            self.fired(state, scheduled_ms)
        elif decision == Decision.REPLACE:
            for waiting_ms in state.buffered:
                self.skipped(state, waiting_ms, "Overlap", "a newer occurrence replaced it")
            self.unbuffered(state, len(state.buffered))
            state.buffered = [scheduled_ms]
            self.fired(state, scheduled_ms)
        else:  # CANCEL: the runs in flight are asked to stop (`cancel`); as Temporal's
            # cancel_other, the new one starts once they have ended (it waits in the
            # buffer, replacing an older waiting one). "Ended" is as reported: see
            # the known edges in docs/DESIGN.md §6.6.
            why = "a newer occurrence came due (overlap cancel_other)"
            for waiting_ms in state.buffered:
                self.skipped(state, waiting_ms, "Overlap", "a newer occurrence replaced it")
            self.unbuffered(state, len(state.buffered))
            state.buffered = []
            for run in live:
                if run.retry_ms is not None:
                    self._cancels.cancel_waiting(state, run, why, now_ms)
                elif run.cancel_reason is None:
                    self._cancels.request_cancel(state, run, why, now_ms)
            if _live_runs(state):
                state.buffered = [scheduled_ms]
                self.fired(state, scheduled_ms)
            else:
                self._start_run(state, scheduled_ms, now_ms)

    def fired(self, state: ScheduleState, scheduled_ms: int) -> None:
        last_ms = state.last_fired_ms
        if last_ms is None or scheduled_ms > last_ms:
            state.last_fired_ms = scheduled_ms
        limit = state.definition.max_runs
        if limit is not None:
            self._counted(state, limit)

    def unbuffered(self, state: ScheduleState, count: int) -> None:
        """``count`` buffered occurrences will never start (replaced, cancelled,
        trimmed): they no longer count against max_runs, and a schedule completed by
        them may fire again, from after what it handled."""
        limit = state.definition.max_runs
        if limit is None or count <= 0:
            return
        state.fired_count = max(0, state.fired_count - count)
        if state.completed == "max_runs" and state.fired_count < limit:
            state.completed = None
            handled_ms = state.handled_ms()
            if handled_ms is not None:
                state.next_ms = next_ms = state.definition.compiled.next_after(handled_ms)
                if not state.paused and next_ms is not None:
                    self._wheel.arm(state, next_ms)

    def _counted(self, state: ScheduleState, limit: int) -> None:
        """A run started (or was buffered): count it; at ``limit`` the schedule is
        completed and nothing more fires."""
        count = state.fired_count = state.fired_count + 1
        if count >= limit:
            state.completed = "max_runs"
            state.next_ms = None
            self._wheel.cancel(state)

    def _start_run(
        self,
        state: ScheduleState,
        scheduled_ms: int,
        now_ms: int,
        definition: Definition | None = None,
        buffered: bool = False,
    ) -> None:
        # ``buffered``: an occurrence counted against max_runs when it was buffered.
        # The herd's path: one call per fire, attempt 1 emitted inline (as
        # `_emit_attempt` would) from the parts its definition shares at ``now_ms``.
        scheduled = INSTANT_TEXTS.get(scheduled_ms) or instant_text(scheduled_ms)
        schedule_id = state.id
        run_id = f"{schedule_id}@{scheduled}"  # `run_id_for`, without a task
        if definition is None:
            definition = state.definition
        if definition.delivery is not None:  # a Kafka target: the shard writes it now
            self._deliver(state, run_id, scheduled_ms, 1, now_ms, definition.delivery)
            return
        runs = state._runs
        if runs is None:
            runs = state._runs = {}
        elif run_id in runs:  # only a trigger can collide with an occurrence
            self.skipped(state, scheduled_ms, "Duplicate", "a run with this id is in flight")
            return
        parts = definition._fire_parts  # `fire_parts`, inline: once per definition and tick
        if parts is None or parts.now_ms != now_ms:
            parts = definition.fire_parts(now_ms)
        id_json = state.id_json()
        # First (before any change): if it raises, nothing changed.
        value = (
            f'{{"v":1,"run_id":{id_json[:-1]}@{scheduled}","schedule_id":{id_json},'
            f'"scheduled_at":"{scheduled}{parts.first_attempt}{run_key(run_id)}{parts.tail}'
        ).encode()
        run = RunState(state, run_id, scheduled_ms, None, 1, 1)
        run.fired_ms = now_ms
        run.deadline_ms = deadline_ms = parts.deadline_ms
        due_ms = deadline_ms + TIMEOUT_MARGIN_MS
        if definition.deadline is not None:  # its alerts' timer shares the run's
            run.watch = new_watch(definition.deadline, scheduled_ms)
            due_ms = self.alerts.timer_ms(run)
        queue = definition.queue
        refused = None
        if queue is None:
            self._out.append(OutRecord(_RUNS, schedule_id.encode(), value))
        else:
            job = definition.run_job  # its keys rendered (`topics.key_templates`)
            refused = self.place(
                run, queue, state.key, value, placed_by(job.concurrency, job.rate_limit)
            )
        self._wheel.arm(run, due_ms)
        runs[run_id] = run
        self.in_flight += 1
        last_ms = state.last_fired_ms
        if last_ms is None or scheduled_ms > last_ms:
            state.last_fired_ms = scheduled_ms
        self._counts["fired_total"] += 1
        if definition.max_runs is not None and not buffered:
            self._counted(state, definition.max_runs)
        if refused is not None:
            self.queue_refused(state, run, now_ms, refused)

    def place(
        self,
        run: RunState,
        queue: str,
        key: bytes,
        value: bytes,
        route_key: str | None = None,
    ) -> str | None:
        """Write ``run``'s current attempt (``value``) to ``queue``'s topic and keep where
        it went on the run; the reason if the topic cannot take it (nothing written).

        A run with a concurrency key (or a rate limit) goes to the partition of its key
        (``route_key``, `topics.ratelimits.placed_by`), not of its schedule, so every
        run of the key meets one worker (docs/DESIGN.md §8.2, §8.5)."""
        route = None if route_key is None else route_key.encode()
        placed = self.queue_record(queue, key, value, route=route)
        if isinstance(placed, str):
            run.placed = Placed(queue, None)  # its cancels go nowhere: never written
            return placed
        run.placed = Placed(queue, placed)
        return None

    def queue_record(
        self,
        queue: str,
        key: bytes,
        value: bytes,
        partition: int | None = None,
        route: bytes | None = None,
    ) -> int | str:
        """Append the run (or cancel) record ``value`` to ``queue``'s topic, keyed like
        every record of its schedule, and return the partition it went to; or, without
        appending anything, the reason it cannot be written (docs/DESIGN.md §8.1).

        A run's partition is chosen here (murmur2 of the key, as for ``{ns}.runs``),
        from the queue topic's partition count in the runtime's snapshot, and kept on
        the run (`Placed`); its cancel records are given that ``partition``, so they
        land behind the run in order (§6.6) even after partitions were added. A run
        with a concurrency key is ``route``d by the key instead (§8.2)."""
        targets = self.targets
        topic = targets.queue_topic(queue)
        why = targets.queue_why_not(topic)
        if why is not None:
            return why
        known = targets.known[topic]
        size = len(value) + len(key) + QUEUE_FRAMING_BYTES
        if known.max_message_bytes is not None and size > known.max_message_bytes:
            return (
                f"run record of {size} bytes with framing is larger than {topic} accepts"
                f" ({known.max_message_bytes}, max.message.bytes)"
            )
        if partition is None:
            partition = murmur2_partition(key if route is None else route, known.partitions)
        elif partition >= known.partitions:  # the topic was deleted and made again, smaller
            return (
                f"queue topic {topic} has {known.partitions} partitions; the attempt went"
                f" to partition {partition} of the topic it replaced"
            )
        self._out.append(TargetRecord(topic, key, value, partition))
        return partition

    def queue_cancel(
        self, state: ScheduleState, run: RunState, placed: Placed, value: bytes, now_ms: int
    ) -> None:
        """Write the cancel record ``value`` of ``run``'s current attempt to the queue
        topic and partition the attempt went to; if the topic cannot take it now (its
        refusal mark, gone, too small), owe it (``placed.cancel_owed``, in the
        changelog) and try again when the topic can have changed, until the attempt's
        deadline plus the margin, when the shard ends it ``cancelled`` (§6.6, §8.1).

        Writing it inside the refusal mark anyway would risk the whole turn: a record
        the broker refuses aborts the transaction and rebuilds the shard, whose
        re-applied command would write it again, for as long as the topic refuses."""
        written = self.queue_record(placed.queue, state.key, value, placed.partition)
        if not isinstance(written, str):
            placed.cancel_owed = None
            return
        self._counts["queue_refused_total"] += 1
        if placed.cancel_owed is None:
            placed.cancel_owed = now_ms  # when it was requested, for its record
        targets = self.targets
        wait_ms = max(
            CANCEL_RESEND_MS,
            targets.queue_retry_floor_ms(targets.queue_topic(placed.queue), now_ms),
        )
        if now_ms + wait_ms < run.deadline_ms + TIMEOUT_MARGIN_MS:
            self._wheel.arm(run, now_ms + wait_ms)  # moves the deadline's timer earlier

    def resend_cancel(self, run: RunState, now_ms: int) -> None:
        """The timer of an owed cancel: write it now if its topic can take it."""
        state = run.schedule
        placed = run.placed
        assert placed is not None and placed.cancel_owed is not None
        self._wheel.arm(run, self.alerts.timer_ms(run))  # back to the deadline (or a watch's)
        value = cancel_value(
            run_id=run.run_id,
            schedule_id=state.id,
            task=run.task,
            attempt=run.attempt,
            reason=run.cancel_reason or "",
            requested_ms=placed.cancel_owed,
        )
        self.queue_cancel(state, run, placed, value, now_ms)
        if placed.cancel_owed is None:  # written: the debt's end goes to the changelog
            self._dirty[state.id] = state
        # Owed again, nothing changed that the changelog keeps (the retry timer is not
        # in it): a topic that stays refusing must not cost a record at every retry.

    def queue_refused(self, state: ScheduleState, run: RunState, now_ms: int, why: str) -> None:
        """The attempt just put in flight could not be written to its queue's topic: it
        fails at once (a ``failed`` result, `QUEUE_REFUSED_ERROR`), and the retry policy
        decides as for any failed attempt: a later attempt finds the topic once it is
        created, the last one goes to the DLQ. Nothing of the turn is held back.

        The error carries ``retry_after_s``: the next attempt waits at least until the
        topic can have changed (its refusal mark's end, or the runtime's next read of
        the topics for a missing one), so a refusal spends one attempt, not the whole
        retry budget inside its window (`TargetTopics.queue_retry_floor_ms`)."""
        error = {"type": QUEUE_REFUSED_ERROR, "message": why}
        placed = run.placed
        if placed is not None:
            targets = self.targets
            floor_ms = targets.queue_retry_floor_ms(targets.queue_topic(placed.queue), now_ms)
            if floor_ms > 0:
                error[RETRY_AFTER_FIELD] = f"{floor_ms / 1000:.3f}"
        self.run_result(run, RunStatus.FAILED, now_ms, error)
        self._counts["queue_refused_total"] += 1
        self.attempt_failed(state, run, now_ms, RunStatus.FAILED, error, self.worker)
        self._dirty[state.id] = state

    def _emit_attempt(self, state: ScheduleState, run: RunState, now_ms: int) -> str | None:
        """Emit ``run``'s current attempt; the reason if its queue's topic refused it
        (the caller fails the attempt with `queue_refused` once the run is in flight)."""
        run_id = run.run_id
        # The value is built before any change to the run: if it raises, none happened.
        if run.task is None:  # `run_value`'s very bytes, from the definition's parts
            parts = state.definition.fire_parts(now_ms)
            deadline_ms = parts.deadline_ms
            id_json = state.id_json()
            value = (
                f'{{"v":1,"run_id":{id_json[:-1]}{run_id[len(state.id) :]}",'
                f'"schedule_id":{id_json},"scheduled_at":"{instant_text(run.scheduled_ms)}'
                f"{parts.before_attempt}{run.attempt}{parts.after_attempt}"
                f"{run_key(run_id)}{parts.tail}"
            ).encode()
        else:
            job, timeout_ms, _ = self._policy_of(state, run)
            logical_ms, interval = self._dags.dates(state, run)
            deadline_ms = now_ms + timeout_ms
            value = run_value(
                run_id=run_id,
                schedule_id=state.id,
                task=run.task,
                scheduled_ms=run.scheduled_ms,
                fired_ms=now_ms,
                attempt=run.attempt,
                job=job,
                idempotency_key=run_key(run_id),
                deadline_ms=deadline_ms,
                logical_date_ms=logical_ms,
                data_interval=interval,
                # A DAG's start deadline watches the task run (`dag_shard`).
                report_start=run.watch is not None and run.watch.start_due_ms is not None,
            )
        run.fired_ms = now_ms
        run.deadline_ms = deadline_ms
        run.retry_ms = None
        if run.task is None:
            queue = state.definition.queue
            job = state.definition.run_job
            route_key = placed_by(job.concurrency, job.rate_limit)
        else:
            queue = placement_of(job.queue, job.priority)  # a high lane's (§8.4)
            route_key = placed_by(job.concurrency, job.rate_limit)
        refused = None
        if route_key is None and (queue is None or queue == DEFAULT_QUEUE):
            run.placed = None
            self._out.append(OutRecord(_RUNS, state.key, value))
        else:
            refused = self.place(run, queue or DEFAULT_QUEUE, state.key, value, route_key)
        self._wheel.arm(run, self.alerts.timer_ms(run))  # moves a pending one
        return refused

    def start_attempt(self, state: ScheduleState, run: RunState, now_ms: int) -> None:
        """Put ``run`` in flight at its attempt (a replay, a DAG task); the attempt is
        emitted first: if that raises, nothing changed. (A Kafka target's attempt is
        written and ended at once: it never is in flight.)"""
        delivery = state.definition.delivery if run.task is None else None
        if delivery is not None:
            self._deliver(state, run.run_id, run.scheduled_ms, run.attempt, now_ms, delivery)
            return
        refused = self._emit_attempt(state, run, now_ms)
        state.runs[run.run_id] = run
        self.in_flight += 1
        if refused is not None:
            self.queue_refused(state, run, now_ms, refused)

    def target_refusal(self, job: Job, state: ScheduleState | None) -> str | None:
        """Why an upsert of ``job`` is refused for its Kafka target, else None: a topic
        the namespace does not allow (known at once, unlike a missing topic, which a
        fire reports: it may be created before then), or runs of a job in flight (their
        retries would go to workers as the target's carrier job)."""
        if job.name != KAFKA_JOB:
            return None
        if state is not None and state._runs and state.definition.delivery is None:
            return (
                f"target: schedule {state.id!r} has {len(state._runs)} run(s) of its job in"
                " flight; a Kafka target cannot take them over: wait for them to end (or"
                " cancel them), then send the upsert again"
            )
        topic = str(job.args.get("topic"))
        if self.targets.allows(topic):
            return None
        return "target.kafka.topic: " + refusal_of(
            topic, self.targets.allowed, self.targets.own_prefix
        )

    def _deliver(
        self,
        state: ScheduleState,
        run_id: str,
        scheduled_ms: int,
        attempt: int,
        now_ms: int,
        delivery: KafkaDelivery,
    ) -> None:
        """A Kafka target's occurrence: its record and ``succeeded`` result, or a
        ``failed`` result and a dead letter saying why it could not be written."""
        definition = state.definition
        occurrence = Occurrence(
            schedule_id=state.id,
            run_id=run_id,
            scheduled_ms=scheduled_ms,
            fired_ms=now_ms,
            attempt=attempt,
            idempotency_key=run_key(run_id),
            interval=(lambda: data_interval(definition.compiled, scheduled_ms))
            if delivery.uses_interval
            else None,
        )
        made = target_record(delivery, occurrence, self.targets)
        last_ms = state.last_fired_ms
        if last_ms is None or scheduled_ms > last_ms:
            state.last_fired_ms = scheduled_ms
        self._counts["fired_total"] += 1
        if definition.max_runs is not None and attempt == 1:  # a replay is no new run
            self._counted(state, definition.max_runs)
        run = RunState(state, run_id, scheduled_ms, None, attempt, attempt)
        run.fired_ms = now_ms
        if isinstance(made, str):
            error = {"type": REFUSED_ERROR, "message": made}
            self.run_result(run, RunStatus.FAILED, now_ms, error)
            self.outcome(run, RunStatus.FAILED, now_ms, error, self.worker)
            self._out.append(
                OutRecord(
                    _DLQ,
                    state.key,
                    dlq_value(
                        run_id=run_id,
                        schedule_id=state.id,
                        task=None,
                        job=definition.job,
                        last_error=error,
                        attempts=run.outcomes,
                        dead_at_ms=now_ms,
                    ),
                )
            )
            self._counts["dead_total"] += 1
            self._counts["target_refused_total"] += 1
            state.remember_dead(run_id, attempt)
            return
        self._out.append(made)
        self._out.append(
            OutRecord(
                _RESULTS,
                state.key,
                result_value(
                    run_id=run_id,
                    schedule_id=state.id,
                    task=None,
                    attempt=attempt,
                    status=RunStatus.SUCCEEDED,
                    scheduled_ms=scheduled_ms,
                    started_ms=now_ms,
                    finished_ms=now_ms,
                    worker=self.worker,
                    error=None,
                    target={"kafka": {"topic": made.topic, "partition": made.partition}},
                ),
                self.partition,
            )
        )
        self._counts["target_delivered_total"] += 1

    def forget_runs(self, state: ScheduleState, now_ms: int) -> None:
        """The schedule is going away: its runs' timers are cancelled, their count
        taken off (the caller drops the schedule and its runs)."""
        wheel = self._wheel
        for run in state.runs.values():
            wheel.cancel(run)
            if run.watch is not None:
                self.alerts.forgotten(run, now_ms)
        self.in_flight -= len(state.runs)

    def _policy_of(self, state: ScheduleState, run: RunState) -> tuple[Job, int, RetryPolicy]:
        """The job (its keys rendered, as its run records carry it), timeout (ms) and
        retry policy of a run. (DAG tasks: per task.)"""
        if run.task is not None:
            return self._dags.task_policy(state, run)
        definition = state.definition
        return definition.run_job, definition.timeout_ms, definition.retry

    def attempt_failed(
        self,
        state: ScheduleState,
        run: RunState,
        now_ms: int,
        status: RunStatus,
        error: Mapping[str, str] | None,
        worker: str,
    ) -> None:
        self.outcome(run, status, now_ms, error, worker)
        job, _, retry = self._policy_of(state, run)
        failures = run.failures_in_series
        error_type = None if error is None else error.get("type")
        if is_final_failure(retry, error_type=error_type, failures_in_series=failures):
            self._out.append(
                OutRecord(
                    _DLQ,
                    state.key,
                    dlq_value(
                        run_id=run.run_id,
                        schedule_id=state.id,
                        task=run.task,
                        job=job,
                        last_error=None if error is None else dict(error),
                        attempts=run.outcomes,
                        dead_at_ms=now_ms,
                    ),
                )
            )
            self._counts["dead_total"] += 1
            state.remember_dead(run.run_id, run.attempt)
            self.end_run(state, run, now_ms)
            return
        # A server's Retry-After (an HTTP target's, carried in the error) is a floor:
        # retrying sooner would only be refused again.
        delay_ms = max(
            backoff_ms(retry, run_id=run.run_id, attempt=run.attempt, failures_in_series=failures),
            retry_after_ms(error),
        )
        run.retry_ms = now_ms + delay_ms
        self._wheel.arm(run, self.alerts.timer_ms(run))  # moves the deadline's

    def outcome(
        self,
        run: RunState,
        status: RunStatus,
        finished_ms: int,
        error: Mapping[str, str] | None,
        worker: str,
    ) -> None:
        outcomes = run.outcomes = list(run.outcomes)
        outcomes.append(
            {
                "attempt": run.attempt,
                "status": status,
                "fired_at": instant_text(run.fired_ms),
                "finished_at": instant_text(finished_ms),
                "worker": worker[:TEXT_MAX_CHARS],
                "error": None if error is None else bounded_error(error),
            }
        )
        if len(outcomes) > OUTCOMES_FIRST + OUTCOMES_LAST:  # keep the first and the last
            del outcomes[OUTCOMES_FIRST]

    def cancel_run(
        self,
        state: ScheduleState,
        run: RunState,
        now_ms: int,
        why: str = "a newer occurrence started (overlap cancel_other)",
    ) -> None:
        """The shard ends a run in flight itself and says so on {ns}.results (a trimmed
        state gives up its runs; see `trim`)."""
        error = {"type": "Overlap", "message": f"cancelled by the shard: {why}"}
        self.run_result(run, RunStatus.CANCELLED, now_ms, error)
        self._counts["cancelled_total"] += 1
        self._wheel.cancel(run)
        if run.watch is not None:
            self.alerts.ended(run, now_ms, now_ms)
        del state.runs[run.run_id]
        self.in_flight -= 1

    def end_run(
        self, state: ScheduleState, run: RunState, now_ms: int, finished_ms: int | None = None
    ) -> None:
        """``run`` leaves the book (ended at ``finished_ms``, a worker's; else now)."""
        self._wheel.cancel(run)
        if run.watch is not None:
            self.alerts.ended(run, now_ms if finished_ms is None else finished_ms, now_ms)
        runs = state.runs
        del runs[run.run_id]
        if not runs:
            state._runs = None  # an idle schedule holds no empty dict
        self.in_flight -= 1
        if run.task is not None:  # its outcome was just recorded: move the DAG run on
            self._dags.task_ended(state, run, now_ms)
        self.drain_buffer(state, now_ms)

    def drain_buffer(self, state: ScheduleState, now_ms: int) -> None:
        if state._aside is not None and runs_ended(state):  # an after_current pause
            self._dirty[state.id] = state
        buffered = state.buffered_or_none
        if buffered and not state.paused and not (state._runs and _live_runs(state)):
            self._start_run(state, buffered.pop(0), now_ms, buffered=True)

    def _report_missed(
        self, state: ScheduleState, plan: Backlog, policy: MisfireMode, grace_s: int
    ) -> None:
        why = f"the shard found it more than misfire.grace_s ({grace_s} s) late; policy {policy}"
        for scheduled_ms in plan.missed:
            self.shard_result(state, scheduled_ms, RunStatus.MISSED, "Misfire", why)
            state.let_pass(scheduled_ms)
        self._counts["missed_total"] += len(plan.missed)
        if plan.summary is not None:
            state.let_pass(plan.summary.last_ms)
            self.shard_result(
                state,
                plan.summary.first_ms,
                RunStatus.MISSED,
                "Misfire",
                _folded(plan.summary, why),
                covers=_covers(plan.summary),
            )
            self._counts["missed_total"] += plan.summary.count

    def skipped(self, state: ScheduleState, scheduled_ms: int, kind: str, why: str) -> None:
        self.shard_result(state, scheduled_ms, RunStatus.SKIPPED, kind, why)
        state.let_pass(scheduled_ms)
        self._counts["skipped_total"] += 1

    def skipped_range(self, state: ScheduleState, summary: MissedRange) -> None:
        why = _folded(summary, "the schedule was paused")
        state.let_pass(summary.last_ms)
        self.shard_result(
            state, summary.first_ms, RunStatus.SKIPPED, "Paused", why, covers=_covers(summary)
        )
        self._counts["skipped_total"] += summary.count

    def shard_result(
        self,
        state: ScheduleState,
        scheduled_ms: int,
        status: RunStatus,
        kind: str,
        why: str,
        task: str | None = None,
        attempt: int = 1,
        *,
        covers: Covers | None = None,
    ) -> None:
        """The shard's own result for an occurrence (or DAG task) that never ran; with
        ``covers``, for the range of occurrences it stands for."""
        self._out.append(
            OutRecord(
                _RESULTS,
                state.key,
                result_value(
                    run_id=run_id_for(state.id, scheduled_ms, task),
                    schedule_id=state.id,
                    task=task,
                    attempt=attempt,
                    status=status,
                    scheduled_ms=scheduled_ms,
                    started_ms=None,
                    finished_ms=None,
                    worker=self.worker,
                    error={"type": kind, "message": why},
                    covers=covers,
                ),
                self.partition,
            )
        )

    def run_result(
        self, run: RunState, status: RunStatus, finished_ms: int, error: Mapping[str, str]
    ) -> None:
        """The shard's own terminal result for the current attempt of a run in flight."""
        state = run.schedule
        self._out.append(
            OutRecord(
                _RESULTS,
                state.key,
                result_value(
                    run_id=run.run_id,
                    schedule_id=state.id,
                    task=run.task,
                    attempt=run.attempt,
                    status=status,
                    scheduled_ms=run.scheduled_ms,
                    started_ms=None,
                    finished_ms=finished_ms,
                    worker=self.worker,
                    error=error,
                ),
                self.partition,
            )
        )


def _live_runs(state: ScheduleState) -> list[RunState]:
    """The runs in flight of the live schedule: all but its backfill's (docs/DESIGN.md
    §6.9), which never count against its overlap policy."""
    runs = list(state.runs.values())
    backfill = state.backfill_running()
    if backfill is None:
        return runs
    return [run for run in runs if run.run_id not in backfill]


def _covers(summary: MissedRange) -> Covers:
    return Covers(summary.first_ms, summary.last_ms, summary.count, summary.exact)


def _folded(summary: MissedRange, why: str) -> str:
    """The folded result's message, for people; programs read its ``covers``."""
    count = f"{summary.count}" if summary.exact else f"at least {summary.count}"
    return (
        f"{count} occurrences from {format_ms(summary.first_ms)} to "
        f"{format_ms(summary.last_ms)} ({why}); one result stands for all of them"
    )
