"""run.cancel in the shard core: the cancel record, the one result, no retry, failover."""

from __future__ import annotations

from actors.shard.runs import TIMEOUT_MARGIN_MS
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.commands import RunCancel, decode_command
from topics.messages import run_id_for

RUN_ID = run_id_for("s", T0 + MINUTE)


def _running(**fields: object) -> Shard:
    shard = Shard()
    shard.send(upsert(spec={"every": "60s"}, timeout_s=300, **fields), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    assert run.run_id == RUN_ID
    return shard


def cancel(run_id: str = RUN_ID, **fields: object) -> dict[str, object]:
    return command("run.cancel", run_id=run_id, **fields)


def test_the_command_is_validated_like_every_command() -> None:
    ok = decode_command(
        b"s", b'{"v":1,"type":"run.cancel","id":"s","run_id":"s@2026-10-10T00:01:00.000Z"}', T0
    )
    assert ok == RunCancel("s", "s@2026-10-10T00:01:00.000Z")
    for body, field in (
        (b'{"v":1,"type":"run.cancel","id":"s"}', "run_id"),
        (b'{"v":1,"type":"run.cancel","id":"s","run_id":"t@2026-10-10T00:01:00.000Z"}', "run_id"),
        (
            b'{"v":1,"type":"run.cancel","id":"s","run_id":"s@2026-10-10T00:01:00.000Z","reason":""}',
            "reason",
        ),
        (
            b'{"v":1,"type":"run.cancel","id":"s","run_id":"s@2026-10-10T00:01:00.000Z","reson":"x"}',
            "reason",
        ),
    ):
        rejection = decode_command(b"s", body, T0)
        assert not isinstance(rejection, RunCancel)
        assert field in rejection.reason


def test_a_bad_cancel_is_rejected_and_the_shard_goes_on() -> None:
    shard = _running()
    out = shard.send(cancel("s@not-an-instant"), at_ms=T0 + MINUTE + SECOND)
    [rejected] = out.rejected
    assert rejected.reason.startswith("run_id")
    assert out.cancels == [] and shard.core.schedule("s") is not None


def test_a_running_attempt_gets_a_cancel_record_and_its_worker_result_ends_the_run() -> None:
    shard = _running()
    out = shard.send(cancel(reason="bad input file"), at_ms=T0 + MINUTE + SECOND)
    [record] = out.cancels
    assert (record.run_id, record.attempt, record.reason) == (RUN_ID, 1, "bad input file")
    assert out.results == []  # the worker writes the attempt's one result
    assert shard.state_doc()["runs"][0]["cancel"] == "bad input file"
    [run] = shard.in_flight()
    done = shard.report(run, "cancelled", error={"type": "Cancelled", "message": "bad input file"})
    assert done.runs == [] and done.results == []
    assert shard.core.schedule("s").runs == {}


def test_a_cancelled_attempt_is_never_retried_whatever_it_reports() -> None:
    shard = _running(retry={"max_attempts": 5, "initial_s": 1, "jitter": "none"})
    shard.send(cancel(), at_ms=T0 + MINUTE + SECOND)
    [run] = shard.in_flight()
    out = shard.report(run, "failed")  # the job raised as it was being stopped
    assert out.runs == [] and out.dlq == [] and shard.core.schedule("s").runs == {}
    assert shard.run_until(T0 + MINUTE + 10 * SECOND).runs == []


def test_a_cancel_no_worker_confirms_ends_cancelled_at_the_deadline_not_timed_out() -> None:
    shard = _running()
    shard.send(cancel(reason="stop"), at_ms=T0 + MINUTE + SECOND)
    out = shard.run_until(T0 + MINUTE + 300 * SECOND + TIMEOUT_MARGIN_MS)
    [result] = [r for r in out.results if r.run_id == RUN_ID]
    assert (result.status, result.attempt, result.worker) == ("cancelled", 1, "shard-0")
    assert result.error is not None and result.error["message"].startswith("stop")
    assert RUN_ID not in {r.run_id for r in out.runs} and out.dlq == []


def test_the_cancel_survives_a_shard_failover() -> None:
    shard = _running()
    shard.send(cancel(reason="stop"), at_ms=T0 + MINUTE + SECOND)
    restored, _ = shard.restored()
    [run] = restored.in_flight()
    assert restored.core.schedule("s").runs[RUN_ID].cancel_reason == "stop"
    out = restored.report(run, "timed_out", error={"type": "Timeout", "message": "late"})
    assert out.runs == [] and restored.core.schedule("s").runs == {}


def test_a_run_waiting_for_a_retry_is_cancelled_by_the_shard_and_never_started() -> None:
    shard = _running(retry={"max_attempts": 5, "initial_s": 30, "jitter": "none"})
    [run] = shard.in_flight()
    shard.report(run, "failed", at_ms=T0 + MINUTE + SECOND)
    out = shard.send(cancel(reason="enough"), at_ms=T0 + MINUTE + 2 * SECOND)
    [result] = out.results
    assert (result.status, result.attempt, result.started_ms) == ("cancelled", 2, None)
    assert out.cancels == [] and out.runs == []
    assert shard.run_until(T0 + MINUTE + 40 * SECOND).runs == []


def test_a_buffered_occurrence_is_cancelled_without_running() -> None:
    shard = _running(overlap="buffer_one")
    shard.run_until(T0 + 2 * MINUTE)
    buffered_id = run_id_for("s", T0 + 2 * MINUTE)
    out = shard.send(cancel(buffered_id), at_ms=T0 + 2 * MINUTE + 1)
    [result] = out.results
    assert (result.run_id, result.status) == (buffered_id, "cancelled")
    [run] = shard.in_flight()
    assert shard.report(run, "succeeded").runs == []  # nothing buffered starts


def test_a_cancel_of_a_finished_run_says_so() -> None:
    shard = _running()
    [run] = shard.in_flight()
    shard.report(run, "succeeded", at_ms=T0 + MINUTE + SECOND)
    out = shard.send(cancel(), at_ms=T0 + MINUTE + 2 * SECOND)
    [note] = out.rejected
    assert "nothing to cancel" in note.reason and out.cancels == [] and out.results == []


def test_a_second_cancel_writes_no_second_record() -> None:
    shard = _running()
    shard.send(cancel(), at_ms=T0 + MINUTE + SECOND)
    out = shard.send(cancel(), at_ms=T0 + MINUTE + 2 * SECOND)
    assert out.cancels == [] and "already" in out.rejected[0].reason
