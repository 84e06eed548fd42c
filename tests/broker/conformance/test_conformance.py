"""The worker protocol's conformance suite, against the worker under test
(`KAFKRON_CONFORMANCE_WORKER`, default the Python worker; docs/WORKER-PROTOCOL.md §13).

Each test has a namespace of its own (3 runs partitions) and drives the worker as a
child process on the real broker: runs are written as a shard writes them, results
read back read_committed and parsed with kafkron's own `parse_result`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from tests.conformance.harness import Worker, probe, probe_until, under_test, wait_results
from tests.kit.worker import (
    T0,
    key_for_partition,
    marks,
    produce,
    results,
    run_record,
    wait_marks,
)
from topics.messages import Result, cancel_value, parse_result, run_id_for
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

PARTITIONS = 3
SESSION_MS = 6_000
WORKER_FIELDS = {
    "v",
    "run_id",
    "schedule_id",
    "attempt",
    "status",
    "scheduled_at",
    "started_at",
    "finished_at",
    "worker",
}


def _outcomes(found: list[Result], prefix: str) -> list[Result]:
    return [r for r in found if r.schedule_id.startswith(prefix)]


async def _raw_results(settings: Settings) -> list[dict[str, Any]]:
    from actors.views.tail import read_to_end

    records = await read_to_end(settings, settings.topic(TopicKind.RESULTS))
    return [orjson.loads(r.value) for r in records if r.value is not None]


async def test_results_are_kafkrons_records(kafka_settings: Settings, tmp_path: Path) -> None:
    """Succeeded, failed, unknown-job and timed-out attempts: each result parses with
    `parse_result` and has exactly the fields of §6, with the run's own values."""
    worker = Worker(kafka_settings, tmp_path, "w1", under_test())
    try:
        await produce(
            kafka_settings,
            [
                run_record("f-ok", "test.noop"),
                run_record("f-fail", "test.fail", {"message": "bad"}, attempt=3),
                run_record("f-unknown", "no.such.job"),
                run_record("f-slow", "test.sleep", {"seconds": 30}, timeout_s=1),
            ],
        )
        found = await wait_results(kafka_settings, lambda rs: len(rs) >= 4, workers=[worker])
        raw = await _raw_results(kafka_settings)
    finally:
        worker.stop()
    by_id = {r.schedule_id: r for r in found}
    assert by_id["f-ok"].status == "succeeded" and by_id["f-ok"].error is None
    fail = by_id["f-fail"]
    assert (fail.status, fail.attempt) == ("failed", 3)
    assert fail.error == {"type": "ValueError", "message": "bad on attempt 3"}
    assert by_id["f-unknown"].status == "failed"
    assert by_id["f-unknown"].error is not None and by_id["f-unknown"].error["type"] == "UnknownJob"
    slow = by_id["f-slow"]
    assert slow.status == "timed_out" and slow.error is not None
    assert slow.error["type"] == "Timeout"
    assert slow.started_ms is not None and slow.finished_ms is not None
    for result in found:
        assert result.worker == "w1"
        assert result.run_id == run_id_for(result.schedule_id, T0)
        assert result.scheduled_ms == T0
        assert result.started_ms is not None and result.finished_ms is not None
        assert result.started_ms <= result.finished_ms
    for record in raw:
        parse_result(orjson.dumps(record))
        extra = set(record) - WORKER_FIELDS
        assert extra <= {"error"}, record
        assert ("error" in record) == (record["status"] != "succeeded"), record


async def test_one_result_per_attempt_through_kill_9(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """Two workers share a burst of 90 runs; one is killed (SIGKILL) while it runs and
    commits, a third joins (a rebalance mid-burst): every attempt ends with exactly one
    visible result."""
    tmpl = under_test()
    w1 = Worker(kafka_settings, tmp_path, "w1", tmpl, concurrency=8, session_timeout_ms=SESSION_MS)
    w2 = Worker(kafka_settings, tmp_path, "w2", tmpl, concurrency=8, session_timeout_ms=SESSION_MS)
    workers = [w1, w2]
    try:
        await probe_until(kafka_settings, PARTITIONS, {"w1", "w2"})
        runs = [
            run_record(f"burst-{i}", "test.sleep", {"seconds": 0.2 + (i % 5) * 0.2})
            for i in range(90)
        ]
        await produce(kafka_settings, runs)
        await wait_marks(tmp_path, lambda ms: sum(1 for m in ms if m[3] == "w1") >= 10)
        w1.kill()
        w3 = Worker(
            kafka_settings, tmp_path, "w3", tmpl, concurrency=8, session_timeout_ms=SESSION_MS
        )
        workers = [w2, w3]
        found = await wait_results(
            kafka_settings,
            lambda rs: len({r.schedule_id for r in _outcomes(rs, "burst-")}) >= 90,
            workers=workers,
            timeout_s=150,
        )
        await asyncio.sleep(2)
        found = _outcomes(await results(kafka_settings), "burst-")
    finally:
        for worker in (w1, *workers):
            worker.stop()
    counts = Counter((r.run_id, r.attempt) for r in found)
    assert len(counts) == 90
    assert all(n == 1 for n in counts.values()), [k for k, n in counts.items() if n > 1]
    assert {r.status for r in found} == {"succeeded"}
    assert "w1" in {m[3] for m in marks(tmp_path)}


async def _uncommitted_results(settings: Settings) -> list[Result]:
    """Every result record of the topic, aborted transactions' included
    (read_uncommitted): what a worker produced whether or not it committed."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from actors.history.recorder import partitions_of

    topic = settings.topic(TopicKind.RESULTS)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_uncommitted",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions_of(consumer, topic)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        begins = await consumer.beginning_offsets(tps)
        for tp in tps:
            consumer.seek(tp, begins[tp])
        found: list[Result] = []
        remaining = set(tps)
        async with asyncio.timeout(60):
            while remaining:
                for tp in list(remaining):
                    if await consumer.position(tp) >= ends[tp]:
                        remaining.discard(tp)
                batches = await consumer.getmany(*remaining, timeout_ms=500) if remaining else {}
                for batch in batches.values():
                    found += [parse_result(r.value) for r in batch if r.value is not None]
        return found
    finally:
        await consumer.stop()


async def test_one_result_per_attempt_through_kill_9_mid_commit(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """The first worker kills itself (SIGKILL, the test-only
    KAFKRON_TEST_KILL_BEFORE_COMMIT hook) in its first transaction with results, after
    the results and the offset were acknowledged and before the commit. The next
    owner fences that transaction (aborted: its results never become visible), reads
    the offset committed before it, runs those attempts again and commits them: one
    visible result per attempt, all from the next owner."""
    tmpl = under_test()
    ids = [key_for_partition(f"midcommit-{i}", 0, PARTITIONS) for i in range(5)]
    first = Worker(
        kafka_settings,
        tmp_path,
        "w1",
        tmpl,
        session_timeout_ms=SESSION_MS,
        env={"KAFKRON_TEST_KILL_BEFORE_COMMIT": "1"},
    )
    second: Worker | None = None
    try:
        await produce(
            kafka_settings, [run_record(sid, "test.sleep", {"seconds": 0.2}) for sid in ids]
        )
        deadline = asyncio.get_running_loop().time() + 90
        while first.proc.poll() is None:
            assert asyncio.get_running_loop().time() < deadline, first.log()
            await asyncio.sleep(0.2)
        assert first.proc.returncode == -9, first.log()
        aborted = [r for r in await _uncommitted_results(kafka_settings) if r.worker == "w1"]
        assert aborted, "the first worker produced no result before it died"
        assert await results(kafka_settings) == []
        second = Worker(kafka_settings, tmp_path, "w2", tmpl, session_timeout_ms=SESSION_MS)
        await wait_results(
            kafka_settings,
            lambda rs: {r.schedule_id for r in rs} >= set(ids),
            workers=[second],
            timeout_s=90,
        )
        await asyncio.sleep(2)
        found = await results(kafka_settings)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    counts = Counter((r.run_id, r.attempt) for r in found)
    assert sorted(counts.values()) == [1] * len(ids), counts
    assert {r.worker for r in found} == {"w2"}
    assert {r.status for r in found} == {"succeeded"}
    starts = Counter((m[1], m[3]) for m in marks(tmp_path) if m[0] == "start")
    for result in aborted:
        assert starts[(result.run_id, "w1")] == 1, result
        assert starts[(result.run_id, "w2")] == 1, result


async def test_a_result_the_broker_refuses_ends_as_result_refused(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """`{ns}.results` takes at most 1 KiB a record (from after the worker started);
    a job fails with a 1,500-character message, so its result is refused for good.
    The worker replaces it by the small `failed` result with error `ResultRefused`
    (no start, no finish, the job's error dropped) and goes on: a later run of the
    same partition gets its own result, the partition never stalls, one result per
    attempt."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from topics.admin import admin_client

    big_id = key_for_partition("refused-big", 0, PARTITIONS)
    after_id = key_for_partition("refused-after", 0, PARTITIONS)
    worker = Worker(kafka_settings, tmp_path, "w1", under_test())
    try:
        # Shrunk once the worker runs: a worker may refuse to start on a results topic
        # smaller than the largest record kafkron writes (the Python worker does).
        await probe(kafka_settings, PARTITIONS, "r")
        async with admin_client(kafka_settings) as admin:
            # AlterConfigs replaces the topic's whole config: restate the cleanup policy.
            configs = {"cleanup.policy": "delete", "max.message.bytes": "1024"}
            topic = kafka_settings.topic(TopicKind.RESULTS)
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs)])
        await produce(kafka_settings, [run_record(big_id, "test.fail", {"message": "x" * 1500})])
        await wait_results(
            kafka_settings, lambda rs: big_id in {r.schedule_id for r in rs}, workers=[worker]
        )
        await produce(kafka_settings, [run_record(after_id, "test.noop")])
        await wait_results(
            kafka_settings, lambda rs: after_id in {r.schedule_id for r in rs}, workers=[worker]
        )
        await asyncio.sleep(2)
        found = _outcomes(await results(kafka_settings), "refused-")
        worker.check_alive()
    finally:
        worker.stop()
    assert sorted(r.schedule_id for r in found) == sorted([big_id, after_id]), found
    by_id = {r.schedule_id: r for r in found}
    big = by_id[big_id]
    assert (big.status, big.attempt, big.worker) == ("failed", 1, "w1")
    assert big.error is not None and big.error["type"] == "ResultRefused", big.error
    assert "refused" in big.error["message"] and "xxxx" not in big.error["message"]
    assert big.started_ms is None and big.finished_ms is None
    assert by_id[after_id].status == "succeeded"
    assert ("start", run_id_for(big_id, T0), 1, "w1") in marks(tmp_path)


async def test_http_jobs_keep_the_egress_rule(kafka_settings: Settings, tmp_path: Path) -> None:
    """HTTP targets (the carrier job `kafkron.http`) to a local server: a worker
    started without --http-allow refuses it by address and by the name localhost
    (failed NonRetryable, "EgressRefused: egress refused ...", the server never hears
    a request); one started with --http-allow 127.0.0.1 calls it and succeeds."""
    from tests.kit.http_server import TargetServer
    from topics.targets import target_job

    async with TargetServer() as server:
        refused_ids = {
            "egress-by-address": server.url("/x"),
            "egress-by-name": server.url("/x", host="localhost"),
        }
        worker = Worker(kafka_settings, tmp_path, "w1", under_test())
        try:
            runs = []
            for sid, url in refused_ids.items():
                job, args = target_job({"http": {"url": url}})
                runs.append(run_record(sid, job, args))
            await produce(kafka_settings, runs)
            refused = await wait_results(
                kafka_settings,
                lambda rs: len(_outcomes(rs, "egress-by-")) >= 2,
                workers=[worker],
                timeout_s=60,
            )
        finally:
            worker.stop()
        heard_while_refusing = list(server.requests)
        allowing = Worker(kafka_settings, tmp_path, "w2", under_test() + " --http-allow 127.0.0.1")
        try:
            job, args = target_job({"http": {"url": server.url("/y")}})
            await produce(kafka_settings, [run_record("egress-allowed", job, args)])
            allowed = await wait_results(
                kafka_settings,
                lambda rs: len(_outcomes(rs, "egress-allowed")) >= 1,
                workers=[allowing],
                timeout_s=60,
            )
        finally:
            allowing.stop()
    assert heard_while_refusing == []
    for result in _outcomes(refused, "egress-by-"):
        assert (result.status, result.worker) == ("failed", "w1"), result
        assert result.error is not None and result.error["type"] == "NonRetryable"
        message = result.error["message"]
        assert message.startswith("EgressRefused: egress refused") and "loopback" in message
    [by_name] = _outcomes(refused, "egress-by-name")
    assert by_name.error is not None and "localhost resolves to" in by_name.error["message"]
    [ok] = _outcomes(allowed, "egress-allowed")
    assert (ok.status, ok.worker) == ("succeeded", "w2"), ok
    assert ok.target is not None and ok.target["http"]["status"] == 200, ok.target
    assert len(server.on("/y")) == 1


async def test_cancel_of_a_running_and_a_queued_run(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """One slot: a stoppable job runs, a second run of the same partition waits. A
    cancel of each: the running job is stopped and ends cancelled (started), the queued
    run never starts and ends cancelled (never started); one result each."""
    worker = Worker(kafka_settings, tmp_path, "w1", under_test(), concurrency=1)
    try:
        await probe(kafka_settings, PARTITIONS, "c")
        running_id = key_for_partition("cancel-run", 0, PARTITIONS)
        queued_id = key_for_partition("cancel-queued", 0, PARTITIONS)
        await produce(
            kafka_settings,
            [
                run_record(running_id, "test.stoppable", {"seconds": 60}),
                run_record(queued_id, "test.stoppable", {"seconds": 60}),
            ],
        )
        run_running = run_id_for(running_id, T0)
        await wait_marks(tmp_path, lambda ms: ("start", run_running, 1, "w1") in ms)
        cancels = [
            (
                schedule_id.encode(),
                cancel_value(
                    run_id=run_id_for(schedule_id, T0),
                    schedule_id=schedule_id,
                    task=None,
                    attempt=1,
                    reason=f"stop {schedule_id}",
                    requested_ms=T0,
                ),
            )
            for schedule_id in (queued_id, running_id)
        ]
        await produce(kafka_settings, cancels)
        found = await wait_results(
            kafka_settings,
            lambda rs: len(_outcomes(rs, "cancel-")) >= 2,
            workers=[worker],
            timeout_s=60,
        )
        await asyncio.sleep(2)
        found = _outcomes(await results(kafka_settings), "cancel-")
    finally:
        worker.stop()
    by_id = {r.schedule_id: r for r in found}
    assert len(found) == 2
    stopped, never = by_id[running_id], by_id[queued_id]
    assert stopped.status == never.status == "cancelled"
    assert stopped.error == {"type": "Cancelled", "message": f"stop {running_id}"}
    assert never.error == {"type": "Cancelled", "message": f"stop {queued_id}"}
    assert stopped.started_ms is not None and never.started_ms is None
    got = marks(tmp_path)
    assert ("stopped", run_running, 1, "w1") in got
    assert not [m for m in got if m[1] == run_id_for(queued_id, T0)]


async def test_a_long_run_keeps_its_partition_and_reports_progress(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """A 14 s job that reports progress every 50 ms, with a 6 s session: it runs once,
    ends succeeded, and its progress reports (`running`, at most one per 10 s) parse."""
    worker = Worker(kafka_settings, tmp_path, "w1", under_test(), session_timeout_ms=SESSION_MS)
    try:
        await produce(kafka_settings, [run_record("long", "test.sleep_sync", {"seconds": 14})])
        found = await wait_results(
            kafka_settings, lambda rs: len(rs) >= 1, workers=[worker], timeout_s=90
        )
        progress = await results(kafka_settings, progress=True)
    finally:
        worker.stop()
    assert [(r.schedule_id, r.status) for r in found] == [("long", "succeeded")]
    assert 1 <= len(progress) <= 2, progress
    for report in progress:
        assert report.finished_ms is None and report.error is None
        assert report.progress is not None and "left_s" in report.progress["details"]
    starts = [m for m in marks(tmp_path) if m[0] == "start"]
    assert len(starts) == 1


async def test_a_run_that_asks_reports_its_start_when_it_starts(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """§8.3: a run record with ``report_start`` gets one progress report (details null,
    at its start) as its attempt starts, before its outcome; a run without it none."""
    worker = Worker(kafka_settings, tmp_path, "w1", under_test(), session_timeout_ms=SESSION_MS)
    try:
        await produce(
            kafka_settings,
            [
                run_record("asks", "test.sleep", {"seconds": 2}, report_start=True),
                run_record("plain", "test.sleep", {"seconds": 2}),
            ],
        )
        found = await wait_results(
            kafka_settings, lambda rs: len(rs) >= 2, workers=[worker], timeout_s=90
        )
        progress = await results(kafka_settings, progress=True)
    finally:
        worker.stop()
    by_id = {r.schedule_id: r for r in found}
    assert {sid: r.status for sid, r in by_id.items()} == {
        "asks": "succeeded",
        "plain": "succeeded",
    }
    [report] = [p for p in progress if p.schedule_id == "asks"]
    assert not [p for p in progress if p.schedule_id == "plain"]
    assert report.progress is not None and report.progress["details"] is None
    assert report.started_ms == by_id["asks"].started_ms
    assert report.progress["at"] == format_ms(report.started_ms)
