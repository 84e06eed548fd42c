"""Each occurrence of a Kafka target is seen once on its topic, never early (DESIGN §3.1).

The shard writes a Kafka target's record in the fire's own transaction
(`actors.shard.delivery`), so a read_committed reader of the target topic must see,
for every occurrence the schedule should have fired (from the first one its shard
planned up to the horizon, as `nothing_missed` walks them), exactly one record at
attempt 1: no duplicate (the transaction committed twice, or a record escaped an
aborted one), no gap (a fire lost, or refused and dead-lettered), none appended
before its instant by more than the skew bound (as `never_early`). An occurrence the
misfire policy reported ``missed`` (one result, or inside a folded range) is
accounted for but not delivered; the verdict counts them. Each record carries
kafkron's headers, naming the occurrence, the attempt and the run's idempotency
key, and sits in the topic and partition its definition implies (murmur2 of the
rendered key, or of the run id for a keyless record).

Once healed (past ``heal + settle``), a record is also on time within the
scenario's lateness bound (the simulation only: a broker test's bound is 0, unjudged).
"""

from __future__ import annotations

from actors.scheduler.skew import DEFAULT_BOUND_MS
from simulation.checkers.evidence import Evidence, Verdict
from simulation.checkers.target_records import TargetDelivery
from topics.command_types import ScheduleUpsert
from topics.messages import idempotency_key, run_id_for
from topics.partitioner import murmur2_partition
from topics.targets import KAFKA_JOB
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

SCAN_MAX = 200_000


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict(
        "target-once",
        "each Kafka target occurrence is seen once on its topic, with its headers, never early",
    )
    targets = {sid: c for sid, c in evidence.definitions.items() if c.job.name == KAFKA_JOB}
    seen: dict[tuple[str, int], TargetDelivery] = {}
    for record in evidence.targets:
        key = (record.run_id, record.attempt)
        earlier = seen.get(key)
        if earlier is not None:
            verdict.fail(
                f"{record.run_id} attempt {record.attempt} seen twice: {earlier.where()} and"
                f" {record.where()}"
            )
            continue
        seen[key] = record
        _judge_record(record, targets, verdict, evidence)
    reported = {
        r.run_id for r in evidence.results if r.status in (RunStatus.MISSED, RunStatus.SKIPPED)
    }
    folded = evidence.folded_ranges()
    horizon_ms = evidence.end_ms - evidence.settle_ms
    accounted = 0
    for schedule_id, command in sorted(targets.items()):
        first_ms = evidence.first_next_ms.get(schedule_id)
        if first_ms is None:
            continue  # nothing_missed says whether its upsert reached the changelog
        ranges = folded.get(schedule_id, [])
        o: int | None = first_ms
        scanned = 0
        while o is not None and o <= horizon_ms and scanned < SCAN_MAX:
            scanned += 1
            verdict.checked += 1
            run_id = run_id_for(schedule_id, o)
            if (run_id, 1) not in seen:
                if run_id in reported or any(a <= o <= b for a, b in ranges):
                    accounted += 1
                else:
                    verdict.fail(f"{run_id}: due at {format_ms(o)}, no target record seen")
            o = command.compiled.next_after(o)
    if accounted:
        verdict.rule += f" ({accounted} reported missed by their misfire policy, not delivered)"
    return verdict


def _judge_record(
    record: TargetDelivery, targets: dict[str, ScheduleUpsert], verdict: Verdict, evidence: Evidence
) -> None:
    """One record's own faults: headers, place, identity, earliness, lateness once healed."""
    where = record.where()
    if record.missing:
        verdict.fail(f"{where}: lacks kafkron's headers {', '.join(record.missing)}")
        return
    command = targets.get(record.schedule_id)
    if command is None or record.scheduled_ms is None:
        verdict.fail(f"{where}: {record.run_id} is no occurrence of a Kafka target schedule")
        return
    scheduled = record.scheduled_ms
    if run_id_for(record.schedule_id, scheduled) != record.run_id or (
        command.compiled.next_after(scheduled - 1) != scheduled
    ):
        verdict.fail(f"{where}: {record.run_id} is not an occurrence of {record.schedule_id}")
    if record.idempotency_key != idempotency_key(record.run_id):
        verdict.fail(f"{where}: {record.run_id} carries a wrong idempotency key")
    args = command.job.args
    if record.topic != args["topic"]:
        verdict.fail(f"{where}: {record.run_id} belongs on {args['topic']}")
    hashed = record.key if args.get("key") is not None else record.run_id.encode()
    partitions = evidence.target_partitions.get(record.topic)
    if hashed is not None and partitions:
        expected = murmur2_partition(hashed, partitions)
        if expected != record.partition:
            verdict.fail(f"{where}: {record.run_id} belongs on partition {expected}")
    if record.attempt == 1 and record.append_ms < scheduled - DEFAULT_BOUND_MS:
        verdict.fail(
            f"{where}: {record.run_id} appended at {format_ms(record.append_ms)},"
            f" {scheduled - record.append_ms} ms before it was due"
        )
    late_ms = record.append_ms - scheduled
    healed_ms = evidence.heal_ms + evidence.settle_ms
    bound = evidence.lateness_bound_ms
    if bound > 0 and record.attempt == 1 and scheduled >= healed_ms and late_ms > bound:
        verdict.fail(f"{where}: {record.run_id} {late_ms} ms late once healed (bound {bound})")
