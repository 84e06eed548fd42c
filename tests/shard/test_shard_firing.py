"""Firing, upserts, pause/resume, trigger and delete, driven by records alone."""

from __future__ import annotations

import orjson
import pytest

from actors.shard import runs as runs_module
from actors.shard.core import TIMEOUT_MARGIN_MS
from actors.shard.runs import run_key as real_run_key
from tests.kit.shard import DAY, HOUR, MINUTE, SECOND, T0, Shard, command, upsert
from topics.commands import Job
from topics.messages import idempotency_key, run_id_for
from topics.messages import run_value as real_run_value
from topics.names import TopicKind
from topics.timefmt import format_ms, parse_instant


def test_upsert_writes_the_changelog_and_fires_nothing_yet() -> None:
    shard = Shard()
    out = shard.send(upsert(), at_ms=T0 + 5)
    assert out.runs == [] and out.results == [] and out.rejected == []
    [record] = out.changelog
    assert record.key == b"s" and record.partition == 0
    doc = orjson.loads(record.value or b"")
    assert doc["v"] == 1 and doc["id"] == "s"
    assert doc["next"] == format_ms(T0 + MINUTE)
    assert doc["last_fired"] is None
    assert doc["def"]["spec"] == {"every": "60s"}
    assert doc["def"]["overlap"] == "skip"


def test_an_occurrence_fires_once_at_its_instant_never_early() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    assert shard.advance(T0 + MINUTE - 1).runs == []
    out = shard.advance(T0 + MINUTE)
    [run] = out.runs
    assert run.run_id == f"s@{format_ms(T0 + MINUTE)}" == run_id_for("s", T0 + MINUTE)
    assert run.scheduled_ms == T0 + MINUTE and run.fired_ms == T0 + MINUTE
    assert run.attempt == 1 and run.task is None
    assert run.job.name == "test.job"
    assert run.idempotency_key == idempotency_key(run.run_id)
    assert run.deadline_ms == T0 + MINUTE + 3600 * SECOND
    # The changelog record of the same batch says it fired and what comes next.
    [record] = out.changelog
    doc = orjson.loads(record.value or b"")
    assert doc["last_fired"] == format_ms(T0 + MINUTE)
    assert doc["next"] == format_ms(T0 + 2 * MINUTE)
    assert [r["run_id"] for r in doc["runs"]] == [run.run_id]
    assert shard.advance(T0 + MINUTE + 30 * SECOND).runs == []


def test_each_occurrence_is_emitted_exactly_once_over_a_day_of_ticks() -> None:
    shard = Shard()
    shard.send(upsert(overlap="allow", timeout_s=30), at_ms=T0 + 5)
    fired: list[int] = []
    now = T0
    while now < T0 + DAY:
        now += 7_919  # an awkward tick that never lands on the minute twice alike
        fired += [run.scheduled_ms for run in shard.advance(now).runs if run.attempt == 1]
        for run in fired[-1:]:
            assert run <= now
    assert fired == [T0 + k * MINUTE for k in range(1, len(fired) + 1)]
    assert fired[-1] > now - MINUTE


def test_fires_at_the_occurrence_of_a_cron_spec_in_its_zone() -> None:
    shard = Shard()
    shard.send(upsert(spec={"cron": "30 1 * * *", "tz": "America/New_York"}), at_ms=T0 + 5)
    runs = [run for run in shard.run_until(T0 + DAY).runs if run.attempt == 1]
    assert [run.scheduled_ms for run in runs] == [
        parse_instant("2026-10-10T05:30:00Z")
    ]  # 01:30 EDT


def test_re_upsert_never_refires_an_occurrence_already_fired() -> None:
    shard = Shard()
    shard.send(upsert(overlap="allow"), at_ms=T0 + 5)
    [first] = shard.advance(T0 + MINUTE).runs
    # The same definition again, and then one whose occurrences include the fired one.
    shard.send(upsert(overlap="allow"), at_ms=T0 + MINUTE + 10)
    assert shard.advance(T0 + MINUTE + 20).runs == []
    shard.send(upsert(overlap="allow", spec={"every": "30s"}), at_ms=T0 + MINUTE + 30)
    runs = shard.run_until(T0 + 2 * MINUTE).runs
    assert [r.scheduled_ms for r in runs] == [T0 + MINUTE + 30 * SECOND, T0 + 2 * MINUTE]
    assert first.run_id not in {r.run_id for r in runs}


def test_re_upsert_keeps_an_occurrence_due_but_not_yet_fired() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    # Due at T0+60s; the upsert is applied a few ms later, before the wheel's advance.
    shard.send(upsert(job={"name": "test.other"}), at_ms=T0 + MINUTE + 3)
    [run] = shard.advance(T0 + MINUTE + 4).runs
    assert run.scheduled_ms == T0 + MINUTE and run.job.name == "test.other"


def test_a_new_schedule_does_not_fire_occurrences_from_before_it_existed() -> None:
    shard = Shard()
    shard.send(upsert(spec={"cron": "0 * * * *"}), at_ms=T0 + 2 * MINUTE)
    assert shard.advance(T0 + 3 * MINUTE).runs == []
    [run] = shard.run_until(T0 + HOUR).runs
    assert run.scheduled_ms == T0 + HOUR


def test_a_one_off_at_within_grace_in_the_past_still_fires_once() -> None:
    shard = Shard()
    at = T0 - 60 * SECOND
    shard.send(upsert(spec={"at": format_ms(at)}), at_ms=T0 + 5)
    [run] = shard.advance(T0 + 1).runs
    assert run.scheduled_ms == at
    assert [run for run in shard.run_until(T0 + DAY).runs if run.attempt == 1] == []
    doc = shard.state_doc()
    assert doc["next"] is None and doc["last_fired"] == format_ms(at)


def test_pause_stops_firing_and_resume_reports_the_paused_occurrences_skipped() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    shard.send(command("schedule.pause"), at_ms=T0 + 10)
    assert shard.state_doc()["paused"] is True
    assert shard.run_until(T0 + 5 * MINUTE + 30 * SECOND).runs == []
    out = shard.send(command("schedule.resume"), at_ms=T0 + 5 * MINUTE + 30 * SECOND)
    assert out.runs == []  # Temporal-like: nothing missed while paused is run later
    assert out.statuses() == ["skipped"] * 5
    assert [r.scheduled_ms for r in out.results] == [T0 + k * MINUTE for k in range(1, 6)]
    assert all(r.error is not None and r.error["type"] == "Paused" for r in out.results)
    [run] = shard.run_until(T0 + 6 * MINUTE).runs
    assert run.scheduled_ms == T0 + 6 * MINUTE


def test_pause_and_resume_are_idempotent() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    shard.send(command("schedule.pause"), at_ms=T0 + 6)
    again = shard.send(command("schedule.pause"), at_ms=T0 + 7)
    assert again.records == []
    shard.send(command("schedule.resume"), at_ms=T0 + 8)
    assert shard.send(command("schedule.resume"), at_ms=T0 + 9).records == []


def test_a_long_pause_folds_its_skipped_occurrences_into_one_summary() -> None:
    shard = Shard()
    shard.send(upsert(spec={"every": "1s"}), at_ms=T0 - 1)
    shard.send(command("schedule.pause"), at_ms=T0 - 1)
    out = shard.send(command("schedule.resume"), at_ms=T0 + DAY)
    assert len(out.results) == 101
    summary = out.results[-1]
    # T0 .. T0 + DAY inclusive: 86,401 occurrences, 100 one by one, the rest folded.
    assert summary.error is not None and "86301 occurrences" in summary.error["message"]
    assert summary.scheduled_ms == T0 + 100 * SECOND
    assert shard.core.stats["skipped_total"] == DAY // SECOND + 1


def test_trigger_fires_now_with_the_trigger_instant_as_scheduled_time() -> None:
    shard = Shard()
    shard.send(upsert(spec={"cron": "0 0 * * *"}), at_ms=T0 + 5)
    out = shard.send(command("schedule.trigger"), at_ms=T0 + 1234)
    [run] = out.runs
    assert run.scheduled_ms == run.fired_ms == T0 + 1234
    assert run.run_id == run_id_for("s", T0 + 1234)
    # The spec is untouched: its next occurrence is still tomorrow.
    assert shard.state_doc()["next"] == format_ms(T0 + DAY)


def test_trigger_respects_the_overlap_policy() -> None:
    shard = Shard()
    shard.send(upsert(spec={"cron": "0 0 * * *"}), at_ms=T0 + 5)
    shard.send(command("schedule.trigger"), at_ms=T0 + 6)
    out = shard.send(command("schedule.trigger"), at_ms=T0 + 7)
    assert out.runs == [] and out.statuses() == ["skipped"]


def test_trigger_works_on_a_paused_schedule() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    shard.send(command("schedule.pause"), at_ms=T0 + 6)
    assert len(shard.send(command("schedule.trigger"), at_ms=T0 + 7).runs) == 1


def test_a_trigger_at_the_instant_of_an_occurrence_is_rejected_with_a_reason() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    [fired] = shard.advance(T0 + MINUTE).runs
    out = shard.send(command("schedule.trigger"), at_ms=T0 + MINUTE)
    assert out.runs == []
    [rejection] = out.rejected
    assert "this very instant" in rejection.reason
    assert fired.scheduled_ms == T0 + MINUTE


def test_delete_writes_a_tombstone_cancels_timers_and_ignores_later_results() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    out = shard.send(command("schedule.delete"), at_ms=T0 + MINUTE + 1)
    [tombstone] = out.changelog
    assert tombstone.key == b"s" and tombstone.value is None
    assert shard.core.stats["timers"] == 0 and shard.core.next_due_ms() is None
    # Nothing fires; what is left is the removal of the deleted id's floor.
    assert [(r.key, r.value) for r in shard.run_until(T0 + DAY).records] == [(b"@gone/s", None)]
    assert shard.report(run, "failed").records == []
    assert shard.core.stats["results_ignored_total"] == 1


def test_commands_for_an_unknown_schedule_are_rejected_with_a_reason() -> None:
    shard = Shard()
    for kind in ("schedule.delete", "schedule.pause", "schedule.resume", "schedule.trigger"):
        [rejection] = shard.send(command(kind, "ghost")).rejected
        assert "no schedule 'ghost'" in rejection.reason
        assert rejection.topic == "kafkron.commands"


def test_an_upsert_can_follow_a_delete_of_the_same_id() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    shard.send(command("schedule.delete"), at_ms=T0 + 6)
    out = shard.send(upsert(spec={"every": "30s"}), at_ms=T0 + 7)
    assert out.changelog[-1].value is not None
    [run] = shard.run_until(T0 + 30 * SECOND).runs
    assert run.scheduled_ms == T0 + 30 * SECOND


def test_stats_count_fires_and_lateness() -> None:
    shard = Shard()
    shard.send(upsert(overlap="allow"), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE + 7)
    stats = shard.core.stats
    assert stats["schedules"] == 1 and stats["fired_total"] == 1
    assert stats["lateness_ms_max"] == 7
    # one next-fire timer and one deadline timer
    assert stats["timers"] == 2 and stats["in_flight"] == 1


def test_a_running_attempt_without_result_times_out_after_deadline_and_margin() -> None:
    shard = Shard()
    shard.send(upsert(timeout_s=10, spec={"cron": "0 0 * * *"}), at_ms=T0 - 1)
    [run] = shard.advance(T0).runs
    assert shard.advance(T0 + 10 * SECOND + TIMEOUT_MARGIN_MS - 1).results == []
    out = shard.advance(T0 + 10 * SECOND + TIMEOUT_MARGIN_MS)
    [result] = out.results
    assert result.status == "timed_out" and result.run_id == run.run_id
    assert result.worker == "shard-0"
    assert shard.core.stats["timed_out_total"] == 1
    # ... and it is retried like any failed attempt
    retry = shard.run_until(T0 + 10 * SECOND + TIMEOUT_MARGIN_MS + 2 * SECOND).runs
    assert [(r.run_id, r.attempt) for r in retry] == [(run.run_id, 2)]


def test_the_changelog_holds_one_record_per_schedule_per_batch() -> None:
    shard = Shard()
    shard.send(upsert("a", spec={"every": "1s"}, overlap="allow", timeout_s=1), at_ms=T0 + 5)
    out = shard.advance(T0 + 10 * SECOND)  # ten occurrences within grace fire in one batch
    assert len(out.runs) == 10
    assert [r.key for r in out.changelog] == [b"a"]
    assert out.of(TopicKind.SCHEDULES)[0].partition == 0


def test_an_error_in_the_middle_of_firing_leaves_the_schedule_written_and_armed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two occurrences due at once under allow; building the second run record fails
    # (standing in for any bug): the first run is in the changelog, the failed
    # occurrence is not handled twice, and the schedule keeps firing.
    shard = Shard()
    shard.send(upsert(overlap="allow"), at_ms=T0 + 5)
    calls = []

    def second_call_fails(run_id: str) -> str:
        calls.append(run_id)
        if len(calls) == 2:
            raise RuntimeError("injected")
        return real_run_key(run_id)

    monkeypatch.setattr(runs_module, "run_key", second_call_fails)
    out = shard.advance(T0 + 2 * MINUTE)
    monkeypatch.setattr(runs_module, "run_key", real_run_key)
    [run] = out.runs
    assert run.scheduled_ms == T0 + MINUTE
    assert shard.core.stats["errors_total"] == 1
    doc = shard.state_doc()
    assert [r["run_id"] for r in doc["runs"]] == [run.run_id]
    assert doc["next"] == format_ms(T0 + 3 * MINUTE)
    assert shard.core.next_due_ms() is not None
    later = shard.run_until(T0 + 3 * MINUTE)
    assert [r.scheduled_ms for r in later.runs] == [T0 + 3 * MINUTE]
    restored, _ = shard.restored()
    before, after = shard.core.schedule("s"), restored.core.schedule("s")
    assert before is not None and after is not None
    assert set(after.runs) == set(before.runs)


def test_an_error_emitting_a_retry_tries_it_again_later(monkeypatch: pytest.MonkeyPatch) -> None:
    shard = Shard()
    shard.send(
        upsert(spec={"cron": "0 0 * * *"}, retry={"max_attempts": 3, "jitter": "none"}),
        at_ms=T0 + 5,
    )
    [run] = shard.advance(T0 + DAY).runs
    shard.report(run, "failed", at_ms=T0 + DAY + SECOND)

    def fails(run_id: str) -> str:
        raise RuntimeError("injected")

    monkeypatch.setattr(runs_module, "run_key", fails)
    assert shard.advance(T0 + DAY + 2 * SECOND).runs == []
    monkeypatch.setattr(runs_module, "run_key", real_run_key)
    [retry] = shard.run_until(T0 + DAY + 2 * MINUTE).runs
    assert retry.run_id == run.run_id and retry.attempt == 2


def test_a_run_record_is_byte_for_byte_what_run_value_writes() -> None:
    # The shard spells a plain run's record itself (a herd's path); it must stay
    # exactly the wire format's builder's output, non-ASCII text and key order included.
    shard = Shard()
    body = upsert("tenant.é", job={"name": "n\u2028", "args": {"b": [1, {"c": None}]}})
    shard.send(body, at_ms=T0 + 5)
    [record] = shard.advance(T0 + MINUTE).of(TopicKind.RUNS)
    run_id = run_id_for("tenant.é", T0 + MINUTE)
    assert record.value == real_run_value(
        run_id=run_id,
        schedule_id="tenant.é",
        task=None,
        scheduled_ms=T0 + MINUTE,
        fired_ms=T0 + MINUTE,
        attempt=1,
        job=Job("n\u2028", {"b": [1, {"c": None}]}),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=T0 + MINUTE + 3600 * SECOND,
    )
