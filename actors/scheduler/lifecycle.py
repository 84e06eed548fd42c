"""The scheduler process's decisions, as a pure state machine: one machine, two executors.

Rules of this module
--------------------
Everything that decides *which shards this process holds, when it may build,
fire and write, and what it does when Kafka says no* lives here, and nothing here
does I/O: no asyncio, no Kafka client, no clock reads. Time comes in as ints
(``local_ms``: the wall clock schedules are due by; ``mono_ms``: a clock that
never steps, for waits and backoffs), events come in as method calls, and the
machine answers with actions, frozen dataclasses the caller carries out and
reports back on. Two executors carry them out: `actors.scheduler.runtime` on
aiokafka, and `simulation.node` on the simulated Kafka, so a seed of the
simulation exercises exactly the decisions the production loop makes.

Theory of operation
-------------------
A shard p is one partition of ``{ns}.commands`` and of ``{ns}.results`` given to
this process by the consumer group (the lease). Its life, per build attempt (a
*token*: every resource the executor opens for an attempt is keyed by it, and an
event carrying an old token is answered by closing what it opened)::

    phase        on                      next           action out
    ---------    ---------------------   ------------   -------------------------------
    (none)       assigned                WAITING(now)   Pause
    WAITING      tick past not_before    FENCING        Fence     (init_transactions)
    FENCING      fence_done              PROBING        Probe     (aborted one-record txn)
    PROBING      probe_done, new         RESTORING      Restore   (changelog to its end)
    PROBING      probe_done, warm        RESTORING      CatchUp   (standby's core to the end)
    PROBING      probe_done, resumed     POSITIONING    Position  (committed offsets)
    RESTORING    restore_done            POSITIONING    Position
    POSITIONING  position_done           LIVE           (records flow; turns write)
    LIVE         write_done              LIVE
    LIVE         write_failed, fenced    WAITING(+session)  Close + Pause
    LIVE         write_failed            WAITING(+backoff)  Close + Pause
    LIVE         write_failed, denied    WAITING(+doubling) Close + Pause (noted once per interval)
    building     step_failed, denied     WAITING(+doubling) Close + Pause (noted once per interval)
    building     step_failed             WAITING(+backoff)  Close + Pause
    LIVE         revoked                 PARKED         (core and producer kept)
    PARKED       assigned again          PROBING        Probe     (resume: no fence, no restore)
    (not owned)  assigned, wanted warm   (standby)      Tail      (tail its changelog)
    (standby)    assigned, not wanted    (none)         Untail
    (standby)    assigned to us          WAITING        (its core waits for the probe)
    PARKED       assigned, not given     (none)         Close
    other        revoked                 (none)         Close (if it opened anything)

Why each rule:

- **Fence before anything is read.** ``init_transactions`` of ``{ns}.shard.{p}``
  bumps the epoch: every earlier owner's open transaction is aborted and its
  later ones refused. Only then are the changelog's end and the committed
  offsets final.
- **Probe before the first fire.** The skew guard learns the broker's clock from
  the LogAppendTime stamps of our own writes to ``{ns}.runs``; a process that has
  not written has no sample. A probe is one record in a transaction that is
  always aborted. A topic that is not LogAppendTime gives no broker time at all:
  the shard is not built (never early cannot be kept), and the note says why.
  The probe is also how a parked shard proves it is still the current epoch: if
  anyone owned p meanwhile, it fails with ProducerFenced and p is built afresh.
- **A clock that steps invalidates what we know of it.** Each turn compares
  ``local_ms - mono_ms`` with its value at the last sample; a change beyond half
  the skew bound is a step (NTP, a resumed VM): the samples are dropped and no
  shard fires until a fresh probe has measured the clock again. So an idle shard
  learns of a jump before its next fire, not from it. Samples older than
  ``sample_max_age_ms`` are refreshed by a probe too, without holding fires.
- **A failed write drops the shard.** Its core already holds the turn's changes;
  the changelog is the truth, so the shard is rebuilt from it. A fenced write
  means another process believes it owns p: this process waits a session timeout
  before building again (by then one of the two has lost the assignment).
- **A warm standby replaces the restore, never the fence.** With
  ``max_standbys`` > 0 the process keeps the shards it does not own, nearest
  after its own in ring order, warm: the executor tails their changelog
  partitions into cores and reports each time one reached the end
  (``standby_caught_up``). Assigned such a shard, the process still fences and
  probes first; then, if the standby caught up within ``standby_max_staleness_ms``,
  a `CatchUp` feeds its core from its position to the end (final after the
  fence: a standby that fell behind catches up before it fires) instead of a
  full `Restore`. A standby never caught up, or too stale, is dropped (`Untail`)
  and the shard restored in full. Every stretch a standby spends behind its
  changelog (from its tail's start or last catch-up to the next) is held to the
  same bound when it ends: one longer may have missed a delete whose tombstone
  compaction removed meanwhile, so that standby is read again from offset 0.
- **Revocation parks.** Eager rebalancing revokes every shard on every membership
  change and usually gives most back; a parked shard keeps its core and producer
  and, given back, only probes and re-positions.
- **Builds never block turns.** Each step is a separate action; live shards keep
  turning while others fence or restore (a revocation never waits for a restore).
- **Bounded turns.** One turn fires at most ``max_fires_per_turn`` per shard; a
  backlog goes out over several transactions, the next turn at once.
- **A refusal backs off, quietly.** A missing ACL (the executor says which, as
  ``denied``) is not cured by rebuilding at once: the shard is closed (its
  transaction aborted, nothing of it committed) and left alone for a backoff
  that doubles from ``rebuild_backoff_ms`` to ``DENIED_BACKOFF_MAX_MS``, so a
  revoked ACL costs one fence and one probe per backoff, not a rebuild loop. The
  refusal is noted when it starts and then once per ``DENIED_NOTE_INTERVAL_MS``
  (with how many attempts were refused meanwhile); the first committed write
  after it says the shard is authorized again. Rebuilding from the changelog
  and the committed offsets is what makes the restored shard lose nothing and
  repeat nothing.
- **A run record the runs topic cannot take** is ended as a failed, non-retryable
  attempt in the same turn (`actors.scheduler.oversize`), never written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from actors.scheduler.oversize import end_oversized_runs
from actors.scheduler.skew import DEFAULT_BOUND_MS, SkewEstimator
from actors.scheduler.warm import MAX_STALENESS_MS, Watch, standby_partitions
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.targets import TargetTopics

INPUTS = (TopicKind.COMMANDS, TopicKind.RESULTS)
REBUILD_BACKOFF_MS = 1_000
MAX_SLEEP_MS = 1_000
# How soon to look again while a shard waits to be built (a cheap turn).
WAITING_POLL_MS = 100
SAMPLE_MAX_AGE_MS = 60_000
# A refused shard (a missing ACL) is tried again after a backoff doubling up to this:
# an admin restoring the ACL sees firing resume within it.
DENIED_BACKOFF_MAX_MS = 30_000
# While a refusal lasts, its note is repeated at most this often.
DENIED_NOTE_INTERVAL_MS = 60_000


class Phase(StrEnum):
    WAITING = "waiting"
    FENCING = "fencing"
    PROBING = "probing"
    RESTORING = "restoring"
    POSITIONING = "positioning"
    LIVE = "live"
    PARKED = "parked"


_BUILDING = frozenset({Phase.FENCING, Phase.PROBING, Phase.RESTORING, Phase.POSITIONING})


class CoreLike(Protocol):
    """What the machine needs of `actors.shard.ShardCore`."""

    def apply(self, record: InRecord, now_ms: int) -> list[OutRecord]: ...
    def advance(self, now_ms: int, max_fires: int | None = None) -> list[OutRecord]: ...
    def next_due_ms(self) -> int | None: ...
    def set_target_topics(self, targets: TargetTopics) -> None: ...
    @property
    def stats(self) -> Mapping[str, Any]: ...


# -- actions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pause:
    """Stop fetching the shard's inputs (nothing is read before it is live)."""

    partition: int


@dataclass(frozen=True, slots=True)
class Fence:
    """Start a producer with the shard's transactional id (``init_transactions``)."""

    partition: int
    token: int


@dataclass(frozen=True, slots=True)
class Probe:
    """One record to ``{ns}.runs`` in a transaction that is aborted: the broker's clock.

    ``refresh``: a live shard measuring the clock again; its failure is a failed
    write (the shard is rebuilt), not a failed build.
    """

    partition: int
    token: int
    refresh: bool = False


@dataclass(frozen=True, slots=True)
class Restore:
    """Read ``{ns}.schedules[p]`` read_committed to its end into a fresh core."""

    partition: int
    token: int


@dataclass(frozen=True, slots=True)
class Position:
    """Seek the inputs to their committed offsets and resume fetching them."""

    partition: int
    token: int


@dataclass(frozen=True, slots=True)
class Write:
    """ONE transaction: ``records`` plus the consumed ``offsets`` (next offset per input)."""

    partition: int
    token: int
    records: list[OutRecord]
    offsets: dict[TopicKind, int]


@dataclass(frozen=True, slots=True)
class Close:
    """Stop the producer opened under ``token`` and forget its core."""

    partition: int
    token: int
    why: str


@dataclass(frozen=True, slots=True)
class Note:
    """A line for the process log / the simulation's story. ``kind``: a short tag."""

    level: str  # "info" | "warning" | "error"
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class Tail:
    """Keep shard ``partition`` warm: tail its changelog into a fresh core, and report
    each time it reached the end (``standby_caught_up``)."""

    partition: int


@dataclass(frozen=True, slots=True)
class Untail:
    """Stop keeping ``partition`` warm and forget its core (no-op if not kept)."""

    partition: int


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Build from the standby of ``partition``: feed its core from its position to the
    changelog's end (read after the fence, so final), ``finish_restore``, and report
    ``restore_done`` as a `Restore` does. No standby core at hand is a failed step."""

    partition: int
    token: int


Action = Pause | Fence | Probe | Restore | CatchUp | Position | Write | Close | Note | Tail | Untail


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One produce round trip to ``{ns}.runs``: local send/ack instants, broker stamp.

    Both ends are read on the wall clock and on the monotonic clock: a round trip
    during which the two advanced differently saw a clock step, and says nothing.
    """

    sent_ms: int
    acked_ms: int
    broker_ms: int
    sent_mono_ms: int
    acked_mono_ms: int

    def stepped_ms(self) -> int:
        return (self.acked_ms - self.sent_ms) - (self.acked_mono_ms - self.sent_mono_ms)


@dataclass(slots=True)
class Refusal:
    """A partition whose writes the broker refuses (a missing ACL), across its rebuilds."""

    text: str
    backoff_ms: int
    noted_mono_ms: int
    unnoted: int = 0  # refused attempts since the last note


# -- the shard slot ----------------------------------------------------------------------


@dataclass(slots=True)
class Slot:
    partition: int
    phase: Phase
    token: int
    not_before_ms: int = 0
    core: CoreLike | None = None
    resumed: bool = False
    writing: bool = False
    unwritten: list[OutRecord] = field(default_factory=list)
    out: list[OutRecord] = field(default_factory=list)
    offsets: dict[TopicKind, int] = field(default_factory=dict)
    held: list[InRecord] = field(default_factory=list)  # fed while fires are held
    # This attempt may take over from a standby (then `standby_watch` says how fresh).
    standby: bool = False
    standby_watch: Watch | None = None


class SchedulerMachine:
    """The decisions of one scheduler process (see the module docstring)."""

    def __init__(
        self,
        *,
        session_timeout_ms: int,
        max_fires_per_turn: int | None = None,
        skew_bound_ms: int = DEFAULT_BOUND_MS,
        rebuild_backoff_ms: int = REBUILD_BACKOFF_MS,
        sample_max_age_ms: int = SAMPLE_MAX_AGE_MS,
        runs_limit_bytes: int | None = None,
        runs_topic: str = "runs",
        detect_clock_steps: bool = True,
        shard_count: int = 0,
        max_standbys: int = 0,
        standby_max_staleness_ms: int = MAX_STALENESS_MS,
    ) -> None:
        """``detect_clock_steps=False`` exists for the simulation's broken variant only.

        ``shard_count``: the number of shards (0 while unknown: no standbys are kept);
        ``max_standbys``: how many shards not owned to keep warm (each holds its state).
        """
        if max_standbys < 0 or shard_count < 0:
            raise ValueError(
                f"max_standbys and shard_count must not be negative, got {max_standbys}"
                f" and {shard_count}"
            )
        self.shard_count = shard_count
        self.max_standbys = max_standbys
        self.standby_max_staleness_ms = standby_max_staleness_ms
        # Shards kept warm and not owned -> how fresh each standby is.
        self.warm: dict[int, Watch] = {}
        self.detect_clock_steps = detect_clock_steps
        self.session_timeout_ms = session_timeout_ms
        self.max_fires_per_turn = max_fires_per_turn
        self.rebuild_backoff_ms = rebuild_backoff_ms
        self.sample_max_age_ms = sample_max_age_ms
        self.runs_limit_bytes = runs_limit_bytes
        self.runs_topic = runs_topic
        self.skew = SkewEstimator(bound_ms=skew_bound_ms)
        self.slots: dict[int, Slot] = {}
        self.assigned: frozenset[int] = frozenset()
        self._tokens = 0
        self._held_back = False
        # Clock-step detection: local - mono at the last sample; None = nothing known.
        self._wall_minus_mono_ms: int | None = None
        self._sample_mono_ms: int | None = None
        self._sample_needed = False  # a step was seen: no fires until a fresh sample
        self._refreshing: int | None = None  # partition of a refresh probe in flight
        self.refusals: dict[int, Refusal] = {}

    # -- membership ------------------------------------------------------------------

    def assign(self, partitions: Iterable[int], mono_ms: int) -> list[Action]:
        """The group's new assignment for this process (after a revocation)."""
        wanted = frozenset(partitions)
        self.assigned = wanted
        actions: list[Action] = [Pause(p) for p in sorted(wanted)]
        for p in set(self.refusals) - wanted:
            del self.refusals[p]
        for p in sorted(set(self.slots) - wanted):
            gone = self.slots.pop(p)
            actions.append(Close(p, gone.token, "revoked, not assigned back"))
            if gone.standby and gone.standby_watch is not None:
                self.warm[p] = gone.standby_watch  # unused: `_retail` keeps or untails it
        resumed = []
        for p in sorted(wanted):
            slot = self.slots.get(p)
            if slot is None:
                slot = self.slots[p] = Slot(p, Phase.WAITING, self._next_token(), mono_ms)
                if p in self.warm:  # the standby's core now waits for this attempt
                    slot.standby, slot.standby_watch = True, self.warm.pop(p)
            elif slot.phase is Phase.PARKED:
                slot.phase, slot.resumed, slot.writing = Phase.PROBING, True, False
                slot.out, slot.offsets, slot.held = [], {}, []
                actions.append(Probe(p, slot.token))
                resumed.append(p)
        actions.append(Note("info", "own", f"assigned shards {sorted(wanted)}"))
        actions.extend(self._retail(wanted, mono_ms))
        if resumed:
            actions.append(
                Note("info", "resume", f"parked shards {resumed} assigned back: resuming them")
            )
        return actions + self.tick(mono_ms)

    def revoke(self, partitions: Iterable[int]) -> list[Action]:
        """The group takes these shards away (eager rebalancing: usually all of them)."""
        actions: list[Action] = []
        gone = sorted(set(partitions))
        for p in gone:
            slot = self.slots.get(p)
            if slot is None:
                continue
            if self._refreshing == p:
                self._refreshing = None
            if slot.phase is Phase.LIVE and not (slot.writing or slot.out or slot.held):
                slot.phase = Phase.PARKED  # kept whole until the assignment says
            elif slot.phase is Phase.LIVE:
                # Busy (a probe still out on its producer, or records its core has
                # applied but no transaction has written): parking it would resume a
                # core ahead of the committed offsets. Closed; rebuilt if given back.
                del self.slots[p]
                actions.append(Close(p, slot.token, "revoked while busy"))
            elif slot.phase is not Phase.PARKED:
                del self.slots[p]
                if slot.phase is not Phase.WAITING:
                    actions.append(Close(p, slot.token, "revoked while being built"))
                if slot.standby and slot.standby_watch is not None:
                    self.warm[p] = slot.standby_watch  # not used yet: warm again
        self.assigned = self.assigned - set(gone)
        if gone:
            actions.append(Note("info", "revoke", f"revoked shards {gone}"))
        return actions

    def leave(self) -> list[Action]:
        """The process stops (or the group expelled it): close every shard."""
        actions: list[Action] = [
            Close(p, slot.token, "shutting down")
            for p, slot in sorted(self.slots.items())
            if slot.phase is not Phase.WAITING
        ]
        actions.extend(Untail(p) for p, slot in sorted(self.slots.items()) if slot.standby)
        actions.extend(Untail(p) for p in sorted(self.warm))
        self.warm.clear()
        self.slots.clear()
        self.assigned = frozenset()
        self._refreshing = None
        return actions

    # -- building --------------------------------------------------------------------

    def tick(self, mono_ms: int) -> list[Action]:
        """Start building every waiting shard whose time has come."""
        actions: list[Action] = []
        for p, slot in sorted(self.slots.items()):
            if slot.phase is Phase.WAITING and slot.not_before_ms <= mono_ms:
                slot.phase, slot.resumed = Phase.FENCING, False
                actions.append(Fence(p, slot.token))
        return actions

    def fence_done(self, p: int, token: int) -> list[Action]:
        slot = self._current(p, token, Phase.FENCING)
        if slot is None:
            return [Close(p, token, "fenced for an attempt no longer wanted")]
        slot.phase = Phase.PROBING
        return [Probe(p, token)]

    def probe_done(
        self, p: int, token: int, sample: ClockSample | None, mono_ms: int
    ) -> list[Action]:
        """The probe came back; ``sample`` None: the runs topic gave no broker time."""
        slot = self.slots.get(p)
        if slot is not None and slot.token == token and slot.phase is Phase.LIVE:
            # A refresh of a live shard's clock measurement.
            self._refreshing = None
            slot.writing = False
            if sample is None:
                return self._failed(
                    slot, self._no_broker_time(p), mono_ms, backoff_ms=self.session_timeout_ms
                )
            return self._observe(sample)
        slot = self._current(p, token, Phase.PROBING)
        if slot is None:
            return [Close(p, token, "probed for an attempt no longer wanted")]
        if sample is None:
            return self._failed(
                slot, self._no_broker_time(p), mono_ms, backoff_ms=self.session_timeout_ms
            )
        actions = self._observe(sample)
        if slot.resumed:
            slot.phase = Phase.POSITIONING
            actions.append(Position(p, token))
        else:
            slot.phase = Phase.RESTORING
            actions.extend(self._restore_or_catch_up(slot, mono_ms))
        return actions

    def standby_caught_up(self, p: int, mono_ms: int) -> list[Action]:
        """The standby of ``p`` reached its changelog's end at ``mono_ms``.

        If it was behind for longer than the bound since its last catch-up (or its
        tail's start), it may have missed a tombstone that compaction has removed
        since: it is started again from offset 0 (or, already assigned to us, not
        used: the takeover restores in full)."""
        slot = self.slots.get(p)
        held = slot is not None and slot.standby and p not in self.warm
        watch = self.warm.get(p) if not held else (slot.standby_watch if slot else None)
        if watch is None:
            return []
        behind_ms = mono_ms - watch.since_ms
        if behind_ms <= self.standby_max_staleness_ms:
            fresh = Watch(mono_ms, caught_up=True)
            if held and slot is not None:
                slot.standby_watch = fresh
            else:
                self.warm[p] = fresh
            return []
        why = (
            f"standby of shard {p} was behind its changelog for {behind_ms // 1000} s, more"
            f" than {self.standby_max_staleness_ms // 1000} s: compaction may have removed"
            " a delete it did not see"
        )
        if held and slot is not None:
            slot.standby, slot.standby_watch = False, None
            return [Untail(p), Note("warning", "standby", f"{why}; dropped it")]
        self.warm[p] = Watch(mono_ms)
        return [Untail(p), Tail(p), Note("warning", "standby", f"{why}; reading it again")]

    def restore_done(
        self, p: int, token: int, core: CoreLike, unwritten: list[OutRecord]
    ) -> list[Action]:
        slot = self._current(p, token, Phase.RESTORING)
        if slot is None:
            return [Close(p, token, "restored for an attempt no longer wanted")]
        slot.core, slot.unwritten = core, list(unwritten)
        slot.phase = Phase.POSITIONING
        return [Position(p, token)]

    def position_done(self, p: int, token: int) -> list[Action]:
        slot = self._current(p, token, Phase.POSITIONING)
        if slot is None:
            return [Close(p, token, "positioned for an attempt no longer wanted")]
        slot.phase = Phase.LIVE
        how = "resumed after the rebalance (no restore)" if slot.resumed else "taken on"
        return [Note("info", "build", f"shard {p} {how}")]

    def step_failed(
        self,
        p: int,
        token: int,
        *,
        fenced: bool,
        error: str,
        mono_ms: int,
        denied: str | None = None,
    ) -> list[Action]:
        """A build step (fence, probe, restore, position) failed.

        ``denied``: the broker refused it for a missing ACL; the text names the
        operation, the resource and the role that grants it.
        """
        slot = self.slots.get(p)
        if slot is None or slot.token != token or slot.phase in (Phase.LIVE, Phase.PARKED):
            if slot is not None and slot.token == token and slot.phase is Phase.LIVE:
                return self.write_failed(
                    p, token, fenced=fenced, error=error, mono_ms=mono_ms, denied=denied
                )
            return [Close(p, token, "failed attempt no longer wanted")]
        if denied is not None and not fenced:
            return self._refused(slot, denied, mono_ms)
        if slot.resumed and fenced:
            # Someone owned p while it was parked: build it afresh, now.
            return self._failed(slot, f"resume fenced ({error}); rebuilding", mono_ms, 0)
        return self._failed(slot, error, mono_ms, self.rebuild_backoff_ms)

    # -- turns -----------------------------------------------------------------------

    def live(self) -> dict[int, CoreLike]:
        """The cores of the shards records may be fed to now."""
        return {
            p: slot.core
            for p, slot in self.slots.items()
            if slot.phase is Phase.LIVE and slot.core is not None
        }

    def feed(self, p: int, kind: TopicKind, records: list[InRecord], now_ms: int) -> bool:
        """Apply consumed records to shard p; False if p is not live (read them later).

        A shard whose transaction is still out takes records too: what they cause
        waits in the shard for the turn after that transaction's outcome.
        """
        slot = self.slots.get(p)
        if slot is None or slot.phase is not Phase.LIVE or slot.core is None:
            return False
        if not records:
            return True
        if slot.held or not self.may_fire():
            # A clock step is unmeasured: a command may fire (a trigger fires what is
            # due), so records wait, unapplied, until a probe has measured the clock.
            slot.held.extend(records)
            return True
        apply = slot.core.apply
        out = slot.out
        for record in records:
            out.extend(apply(record, now_ms))
        slot.offsets[kind] = records[-1].offset + 1
        return True

    def may_fire(self) -> bool:
        """False while a clock step is unmeasured: timers wait for a fresh sample."""
        return not self._sample_needed

    def begin_turn(self, local_ms: int, mono_ms: int) -> list[Action]:
        """Look at the clocks before anything is fed (a step holds what follows)."""
        return self._watch_clock(local_ms, mono_ms)

    def turn(self, local_ms: int, mono_ms: int) -> list[Action]:
        """Advance every live shard and emit one `Write` per shard with something to say.

        Call `begin_turn` first, then `feed` what was consumed, then this.
        """
        now_ms = self.now_ms(local_ms)
        actions = self._holdback_notes()
        fire = self.may_fire()
        for p, slot in sorted(self.slots.items()):
            if slot.phase is not Phase.LIVE or slot.core is None or slot.writing:
                continue
            if fire and slot.held:
                held, slot.held = slot.held, []
                for record in held:
                    slot.out.extend(slot.core.apply(record, now_ms))
                    slot.offsets[record.topic] = record.offset + 1
            out = slot.out
            if fire:
                out.extend(slot.core.advance(now_ms, self.max_fires_per_turn))
            if slot.unwritten:
                out = slot.unwritten + out
                slot.unwritten = []
            if out:
                out, ended = end_oversized_runs(
                    out,
                    runs_limit_bytes=self.runs_limit_bytes,
                    runs_topic=self.runs_topic,
                    partition=p,
                    apply=slot.core.apply,
                    now_ms=now_ms,
                )
                actions.extend(Note("error", "oversize", f"shard {p}: {line}") for line in ended)
            if out or slot.offsets:
                slot.writing = True
                actions.append(Write(p, slot.token, out, dict(slot.offsets)))
            slot.out, slot.offsets = [], {}
        return actions

    def write_done(self, p: int, token: int, samples: Iterable[ClockSample] = ()) -> list[Action]:
        """The `Write` committed; ``samples``: the broker stamps of its runs batches."""
        slot = self.slots.get(p)
        actions: list[Action] = []
        if slot is not None and slot.token == token:
            slot.writing = False
            if self.refusals.pop(p, None) is not None:
                actions.append(
                    Note("info", "authorized", f"shard {p}: authorized again; firing resumed")
                )
        for sample in samples:
            actions.extend(self._observe(sample))
        return actions

    def write_failed(
        self,
        p: int,
        token: int,
        *,
        fenced: bool,
        error: str,
        mono_ms: int,
        denied: str | None = None,
    ) -> list[Action]:
        """The transaction of `Write` (or a refresh probe) did not commit.

        ``denied``: it was refused for a missing ACL (see `step_failed`).
        """
        slot = self.slots.get(p)
        if slot is None or slot.token != token:
            return [Close(p, token, "write of an attempt no longer wanted failed")]
        if self._refreshing == p:
            self._refreshing = None
        if denied is not None and not fenced:
            return self._refused(slot, denied, mono_ms)
        if fenced:
            note = Note(
                "error",
                "fenced",
                f"ZOMBIE: shard {p} was fenced: another scheduler started its transactional"
                f" id, so it believes it owns shard {p}. This process stops writing for it now"
                " (the broker aborts the open transaction) and looks again in"
                f" {self.session_timeout_ms // 1000} s",
            )
            return [note, *self._failed(slot, "fenced", mono_ms, self.session_timeout_ms)]
        why = f"transaction failed ({error}); dropping its state, rebuilding from the changelog"
        return self._failed(slot, why, mono_ms, self.rebuild_backoff_ms)

    # -- time --------------------------------------------------------------------------

    def now_ms(self, local_ms: int) -> int:
        """The shards' now: the local clock, held back if proven to run ahead."""
        return local_ms - self.skew.holdback_ms()

    def wake_in_ms(self, local_ms: int, mono_ms: int) -> int:
        """How long the executor may wait for records before the next turn."""
        sleep_ms = MAX_SLEEP_MS
        now_ms = self.now_ms(local_ms)
        for slot in self.slots.values():
            if slot.phase is Phase.WAITING:
                sleep_ms = min(sleep_ms, max(slot.not_before_ms - mono_ms, WAITING_POLL_MS))
            elif slot.phase in _BUILDING:
                sleep_ms = min(sleep_ms, WAITING_POLL_MS)  # live soon: look again shortly
            elif slot.phase is Phase.LIVE and slot.core is not None:
                if slot.unwritten or ((slot.out or slot.held) and not slot.writing):
                    return 0 if self.may_fire() or slot.out else WAITING_POLL_MS
                due_ms = slot.core.next_due_ms()
                if due_ms is not None:
                    sleep_ms = min(sleep_ms, due_ms - now_ms)
        # At least 1 ms: the wheel names the start of a bucket, which may lie up to a
        # tick before its first item is due; without the floor that tick would spin.
        return max(1, sleep_ms)

    # -- internals ---------------------------------------------------------------------

    def _restore_or_catch_up(self, slot: Slot, mono_ms: int) -> list[Action]:
        """The build step after the fence and the probe: a catch-up or a full restore."""
        p = slot.partition
        if not slot.standby:
            return [Restore(p, slot.token)]
        slot.standby = False  # one use: the core moves to this attempt, or is dropped
        watch = slot.standby_watch
        if watch is None or not watch.caught_up:
            why = "its standby never caught up with the changelog"
        elif mono_ms - watch.since_ms > self.standby_max_staleness_ms:
            why = (
                f"its standby last caught up {(mono_ms - watch.since_ms) // 1000} s ago, more"
                f" than {self.standby_max_staleness_ms // 1000} s"
            )
        else:
            note = f"shard {p} taken over from its standby: catching up, no full restore"
            return [Note("info", "standby", note), CatchUp(p, slot.token)]
        return [
            Untail(p),
            Note("warning", "standby", f"shard {p}: restoring in full ({why})"),
            Restore(p, slot.token),
        ]

    def _retail(self, owned: frozenset[int], mono_ms: int) -> list[Action]:
        """Keep warm exactly the standbys this assignment wants (and none it owns)."""
        if not self.max_standbys or not self.shard_count:
            return []
        wanted = standby_partitions(self.shard_count, owned, self.max_standbys)
        actions: list[Action] = [Untail(p) for p in sorted(self.warm) if p not in wanted]
        for p in [p for p in self.warm if p not in wanted]:
            del self.warm[p]
        for p in wanted:
            slot = self.slots.get(p)
            if p not in self.warm and not (slot is not None and slot.standby):
                self.warm[p] = Watch(mono_ms)
                actions.append(Tail(p))
        return actions

    def _next_token(self) -> int:
        self._tokens += 1
        return self._tokens

    def _current(self, p: int, token: int, phase: Phase) -> Slot | None:
        slot = self.slots.get(p)
        if slot is None or slot.token != token or slot.phase is not phase:
            return None
        return slot

    def _failed(
        self, slot: Slot, why: str, mono_ms: int, backoff_ms: int, *, note: bool = True
    ) -> list[Action]:
        p = slot.partition
        old = slot.token
        opened = slot.phase is not Phase.WAITING
        retry = self.slots[p] = Slot(p, Phase.WAITING, self._next_token(), mono_ms + backoff_ms)
        # A standby not used by the failed attempt (it failed before its catch-up) is
        # the next attempt's; one used is gone with the attempt's core.
        retry.standby, retry.standby_watch = slot.standby, slot.standby_watch
        actions: list[Action] = [Pause(p)]
        if opened:
            actions.insert(0, Close(p, old, why))
        if backoff_ms:
            why = f"{why}; retrying in {backoff_ms / 1000:.0f} s"
        if note:
            actions.append(Note("error", "drop", f"shard {p}: {why}"))
        if p not in self.assigned:
            del self.slots[p]
            if retry.standby and retry.standby_watch is not None:
                self.warm[p] = retry.standby_watch
        return actions

    def _refused(self, slot: Slot, denied: str, mono_ms: int) -> list[Action]:
        """Leave shard p alone for a growing backoff; note it once per interval."""
        p = slot.partition
        refusal = self.refusals.get(p)
        if refusal is None:
            refusal = Refusal(denied, self.rebuild_backoff_ms, mono_ms)
            self.refusals[p] = refusal
            noted = True
        else:
            refusal.backoff_ms = min(refusal.backoff_ms * 2, DENIED_BACKOFF_MAX_MS)
            refusal.unnoted += 1
            noted = denied != refusal.text or (
                mono_ms - refusal.noted_mono_ms >= DENIED_NOTE_INTERVAL_MS
            )
        actions = self._failed(slot, "refused", mono_ms, refusal.backoff_ms, note=False)
        if noted:
            again = f" (refused {refusal.unnoted} more times since)" if refusal.unnoted else ""
            refusal.text, refusal.noted_mono_ms, refusal.unnoted = denied, mono_ms, 0
            actions.append(
                Note(
                    "error",
                    "denied",
                    f"shard {p}: {denied}{again}. Its transaction was aborted: nothing of it"
                    f" is committed. Shard {p} is left alone and tried again in"
                    f" {refusal.backoff_ms / 1000:.0f} s (then at most every"
                    f" {DENIED_BACKOFF_MAX_MS / 1000:.0f} s) until the ACL is granted",
                )
            )
        return actions

    def _observe(self, sample: ClockSample | None) -> list[Action]:
        if sample is None:
            return []
        stepped_ms = sample.stepped_ms()
        if abs(stepped_ms) > self._step_tolerance_ms():
            return self._stepped(stepped_ms)
        self.skew.observe(
            sent_ms=sample.sent_ms, acked_ms=sample.acked_ms, broker_ms=sample.broker_ms
        )
        # The step detector's new baseline: the clocks as this sample measured them.
        self._wall_minus_mono_ms = sample.acked_ms - sample.acked_mono_ms
        self._sample_mono_ms = sample.acked_mono_ms
        self._sample_needed = False
        return []

    def _no_broker_time(self, p: int) -> str:
        return (
            f"{self.runs_topic} gives no broker time (it is not"
            " message.timestamp.type=LogAppendTime), so firing could be early on a fast"
            f" clock; shard {p} is not started. Fix the topic: kafkron topics check"
        )

    def _step_tolerance_ms(self) -> int:
        return max(self.skew.bound_ms // 2, 1)

    def _stepped(self, stepped_ms: int) -> list[Action]:
        self.skew = SkewEstimator(bound_ms=self.skew.bound_ms)
        self._wall_minus_mono_ms = None
        self._sample_needed = True
        return [
            Note(
                "warning",
                "clock",
                f"the local clock stepped by {stepped_ms:+,} ms; holding fires until"
                " a fresh probe has measured it against the broker's",
            )
        ]

    def _watch_clock(self, local_ms: int, mono_ms: int) -> list[Action]:
        actions: list[Action] = []
        base = self._wall_minus_mono_ms
        if base is not None and self.detect_clock_steps:
            stepped_ms = (local_ms - mono_ms) - base
            if abs(stepped_ms) > self._step_tolerance_ms():
                actions.extend(self._stepped(stepped_ms))
        stale = (
            self._sample_mono_ms is not None
            and mono_ms - self._sample_mono_ms > self.sample_max_age_ms
        )
        if (self._sample_needed or stale) and self._refreshing is None:
            for p, slot in sorted(self.slots.items()):
                if slot.phase is Phase.LIVE and not slot.writing:
                    self._refreshing = p
                    self._sample_mono_ms = mono_ms  # one refresh per interval
                    slot.writing = True  # the probe's transaction uses the shard's producer
                    actions.append(Probe(p, slot.token, refresh=True))
                    break
        return actions

    def _holdback_notes(self) -> list[Action]:
        holdback_ms = self.skew.holdback_ms()
        if holdback_ms and not self._held_back:
            self._held_back = True
            return [
                Note(
                    "error",
                    "clock",
                    f"CLOCK AHEAD: the local clock runs at least {self.skew.ahead_ms:,} ms"
                    f" ahead of the broker's (bound {self.skew.bound_ms:,} ms); holding firing"
                    f" back by {holdback_ms:,} ms so nothing fires early. Fix this machine's"
                    " time sync (NTP/chrony).",
                )
            ]
        if not holdback_ms and self._held_back:
            self._held_back = False
            return [
                Note(
                    "warning",
                    "clock",
                    f"clock skew back within {self.skew.bound_ms:,} ms; firing no longer held back",
                )
            ]
        return []
