"""`kafkron demo`: end to end on the real broker, and its view's arithmetic alone."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from actors.demo import catalog
from actors.demo.feed import DemoFeed
from actors.demo.view import event_line
from actors.history.store import HistoryStore
from tests.kit.cli import cli
from topics import messages
from topics.command_types import Job
from topics.commands import Rejection, decode_command
from topics.names import Settings, TopicKind

T0 = 1_790_000_000_000


def processes_of(namespace: str) -> list[int]:
    """Pids of live processes whose environment names ``namespace`` (the demo's children)."""
    needle = f"KAFKRON_NAMESPACE={namespace}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def demo(namespace: str, db: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "demo",
            "--namespace",
            namespace,
            "--db",
            str(db),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def history_of(db: Path) -> tuple[dict[str, int], dict[str, str]]:
    async with await HistoryStore.open(db, readonly=True) as store:
        counts = await store.status_counts()
        runs = await store.runs(limit=1000)
    return counts, {v.run_id: v.status for v in runs}


@pytest.mark.slow
def test_demo_runs_30_seconds_and_its_history_shows_success_retry_and_dlq(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    db = tmp_path / "demo.db"
    process = demo(kafka_settings.namespace, db, "--duration", "30", "--web-port", "39195")
    assert process.stderr is not None
    early: list[str] = []
    while not any("web console at" in line for line in early):
        line = process.stderr.readline()
        assert line, f"the demo never printed its console's address:\n{''.join(early)}"
        early.append(line)
    url = early[-1].split("web console at ", 1)[1].split()[0]
    assert url.startswith("http://127.0.0.1:3919")  # 39195 or the next free port
    with urllib.request.urlopen(url, timeout=30) as response:  # served while the demo runs
        assert response.status == 200
        assert kafka_settings.namespace in response.read().decode()
    out, rest = process.communicate(timeout=240)
    err = "".join(early) + rest
    assert process.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    # Nothing foreign on the screen: every line on stderr is the demo's own.
    foreign = [line for line in err.splitlines() if line and not line.startswith("kafkron demo:")]
    assert foreign == [], foreign
    counts, runs = asyncio.run(history_of(db))
    assert counts.get("succeeded", 0) >= 3, counts
    assert counts.get("retried", 0) >= 1, counts
    assert counts.get("dead_lettered", 0) >= 1, counts
    assert any(
        r.startswith("charge-expired-card@") and s == "dead_lettered" for r, s in runs.items()
    )
    assert any(r.startswith("fx-rates@") and s == "succeeded" for r, s in runs.items())
    # The summary printed what the history holds, and nothing is left running.
    assert f"{counts['dead_lettered']} dead-lettered" in out
    assert "dead_letter" in out and "rejected" in out  # the plain live lines
    assert processes_of(kafka_settings.namespace) == []


@pytest.mark.slow
def test_ctrl_c_stops_every_child(kafka_settings: Settings, tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    process = demo(kafka_settings.namespace, db)
    deadline = time.monotonic() + 120
    # Wait until the scheduler, both workers and the recorder run, then interrupt.
    while len(processes_of(kafka_settings.namespace)) < 4 and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    assert len(processes_of(kafka_settings.namespace)) == 4
    time.sleep(3)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert processes_of(kafka_settings.namespace) == []
    assert "history:" in out


def test_demo_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "demo", "--duration", "0")
    assert code == 2 and "--duration" in err
    code, _, err = cli(capsys, "demo", "--duration", "soon")
    assert code == 2


def test_catalog_commands_are_valid_and_name_their_jobs() -> None:
    now_ms = int(time.time() * 1000)
    for command in [*catalog.schedules(now_ms), catalog.dag()]:
        decoded = decode_command(command.key, command.value, now_ms)
        assert not isinstance(decoded, Rejection), (command.id, decoded)
    broken = decode_command(*catalog.BROKEN_COMMAND, now_ms)
    assert isinstance(broken, Rejection) and "spec.cron" in broken.reason
    assert "billing.always_fails" in catalog.job_names(catalog.schedules(now_ms))
    assert "billing.send_invoices" in catalog.job_names([catalog.dag()])


def test_feed_counts_fires_retries_results_and_dead_letters() -> None:
    feed = DemoFeed()
    job = Job("billing.always_fails", {})
    run_id = messages.run_id_for("charge", T0)

    def run(attempt: int, fired_ms: int) -> bytes:
        return messages.run_value(
            run_id=run_id,
            schedule_id="charge",
            task=None,
            scheduled_ms=T0,
            fired_ms=fired_ms,
            attempt=attempt,
            job=job,
            idempotency_key=messages.idempotency_key(run_id),
            deadline_ms=fired_ms + 60_000,
        )

    def result(attempt: int, status: str) -> bytes:
        return messages.result_value(
            run_id=run_id,
            schedule_id="charge",
            task=None,
            attempt=attempt,
            status=status,
            scheduled_ms=T0,
            started_ms=T0 + attempt * 1000,
            finished_ms=T0 + attempt * 1000 + 5,
            worker="w1",
            error={"type": "RuntimeError", "message": "declined"} if status == "failed" else None,
        )

    fired = feed.apply(TopicKind.RUNS, b"charge", run(1, T0 + 4), T0)
    assert fired is not None and fired.kind == "fired" and "4 ms late" in fired.text
    feed.apply(TopicKind.RESULTS, b"charge", result(1, "failed"), T0)
    retry = feed.apply(TopicKind.RUNS, b"charge", run(2, T0 + 1000), T0)
    assert retry is not None and retry.kind == "retry"
    feed.apply(TopicKind.RESULTS, b"charge", result(2, "failed"), T0)
    dead = messages.dlq_value(
        run_id=run_id,
        schedule_id="charge",
        task=None,
        job=job,
        last_error={"type": "RuntimeError", "message": "declined"},
        attempts=[{"attempt": 1}, {"attempt": 2}],
        dead_at_ms=T0 + 3000,
    )
    event = feed.apply(TopicKind.DLQ, b"charge", dead, T0)
    assert event is not None and "after 2 attempts: RuntimeError: declined" in event.text
    assert "dead_letter" in event_line(event)
    assert feed.apply(TopicKind.RUNS, b"x", b"not json", T0) is None
    assert (
        feed.fired,
        feed.retries,
        feed.failed_attempts,
        feed.dead_letters,
        feed.undecodable,
    ) == (
        1,
        1,
        2,
        1,
        1,
    )
    assert feed.schedules["charge"].last_status == "dead_lettered"
    assert feed.lateness_summary() == "p50 4 ms, p99 4 ms, max 4 ms"
