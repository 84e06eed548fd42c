"""The console's keys page (docs/DESIGN.md §8.2, §8.5): runs fired and not ended, by
queue and by the run record's key, from the recorder's database; bounded to the keys
with the most runs waiting."""

from __future__ import annotations

from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from actors.history.flow_keys import FlowView, KeyRow, with_pauses
from actors.history.recorder import to_row
from actors.history.store import HistoryStore, Row
from actors.web import data
from actors.web.app import Console, WebOptions
from topics.command_types import Job
from topics.concurrency import Concurrency
from topics.messages import idempotency_key, result_value, run_id_for, run_value
from topics.names import Settings, TopicKind
from topics.ratelimits import PauseState, RateLimit
from topics.vocabulary import RunStatus

NS = "t-web-keys"
NO_KAFKA = Settings.from_env(namespace=NS, bootstrap="127.0.0.1:1")  # nothing listens
T0 = 1_790_000_000_000


def _fired(sid: str, job: Job, at_ms: int = T0) -> Row:
    run_id = run_id_for(sid, at_ms)
    value = run_value(
        run_id=run_id, schedule_id=sid, task=None, scheduled_ms=at_ms, fired_ms=at_ms,
        attempt=1, job=job, idempotency_key=idempotency_key(run_id), deadline_ms=at_ms + 60_000,
    )  # fmt: skip
    row = to_row(TopicKind.RUNS, 0, 0, sid.encode(), value, at_ms)
    assert row is not None
    return row


def _result(sid: str, status: RunStatus, at_ms: int = T0) -> Row:
    progress = (None, at_ms + 5) if status == RunStatus.RUNNING else None
    value = result_value(
        run_id=run_id_for(sid, at_ms), schedule_id=sid, task=None, attempt=1, status=status,
        scheduled_ms=at_ms, started_ms=at_ms + 1,
        finished_ms=None if progress else at_ms + 9, worker="w-1", error=None, progress=progress,
    )  # fmt: skip
    row = to_row(TopicKind.RESULTS, 0, 0, sid.encode(), value, at_ms)
    assert row is not None
    return row


def _invoice(customer: str) -> Job:
    return Job("billing.invoice", {}, concurrency=Concurrency(f"invoice-{customer}", 1))


def _rows() -> list[Row]:
    charge = Job("billing.charge", {}, queue="payments", rate_limit=RateLimit("pay-acme", 2.5, 3))
    return [
        _fired("inv-a", _invoice("c-42")),  # running: its progress says it started
        _result("inv-a", RunStatus.RUNNING),
        _fired("inv-b", _invoice("c-42")),  # waiting
        _fired("inv-c", _invoice("c-42")),  # waiting
        _fired("inv-d", _invoice("c-7")),  # ended: not counted
        _result("inv-d", RunStatus.SUCCEEDED),
        _fired("charge-1", charge),
        _fired("plain", Job("etl.load", {})),  # no key: its queue only
    ]


async def _history(tmp_path: Path, rows: list[Row]) -> data.History:
    path = tmp_path / "history.db"
    async with await HistoryStore.open(path, namespace=NS) as store:
        await store.write(rows, {})
    return data.History(path, NS)


async def test_the_data_function_counts_runs_in_flight_by_key_and_queue(tmp_path: Path) -> None:
    view, error = await data.flow_view(await _history(tmp_path, _rows()), NO_KAFKA)
    assert error is None and view is not None
    assert view.keys == [
        KeyRow("invoice-c-42", 1, "queue", None, None, running=1, waiting=2),
        KeyRow("pay-acme", None, None, 2.5, 3, running=0, waiting=1),
    ]
    assert view.keys_total == 2
    assert [(q.queue, q.running, q.waiting) for q in view.queues] == [
        ("default", 1, 3),
        ("payments", 0, 1),
    ]


async def test_the_keys_are_bounded_to_the_top_by_runs_waiting(tmp_path: Path) -> None:
    rows = [_fired(f"s{i}", _invoice(f"c-{i}")) for i in range(300)]
    rows += [_fired("busy", _invoice("c-7"), T0 + 1), _fired("busier", _invoice("c-7"), T0 + 2)]
    view, _ = await data.flow_view(await _history(tmp_path, rows), NO_KAFKA, top=10)
    assert view is not None and len(view.keys) == 10 and view.keys_total == 300
    assert view.keys[0] == KeyRow("invoice-c-7", 1, "queue", None, None, 0, 3)


def test_a_paused_rate_limit_key_says_until_when() -> None:
    rate = KeyRow("pay-acme", None, None, 2.5, 3, 0, 4)
    keyed = KeyRow("invoice-c-42", 1, "queue", None, None, 1, 0)
    view = FlowView([rate, keyed], 2, [])
    pauses = {
        "pay-acme": PauseState(T0 + 60_000, "quota", T0),
        "invoice-c-42": PauseState(None, None, T0),  # not a rate-limit key here
    }
    marked = with_pauses(view, pauses, T0 + 1)
    assert marked.keys[0].paused_until == "2026-09-21T14:14:20.000Z"
    assert marked.keys[1].paused_until is None
    assert with_pauses(view, pauses, T0 + 60_000).keys[0].paused_until is None  # ended
    forever = with_pauses(view, {"pay-acme": PauseState(None, None, T0)}, T0)
    assert forever.keys[0].paused_until == "resume"


async def test_the_keys_page_lists_queues_and_keys_and_is_in_the_nav(tmp_path: Path) -> None:
    history = await _history(tmp_path, _rows())
    console = Console(NO_KAFKA, WebOptions(db=history.path))
    async with TestClient(TestServer(console.app())) as client:
        page = await client.get("/keys")
        text = await page.text()
    assert page.status == 200
    assert '<a href="/keys">Keys</a>' in text
    assert (
        '<td class="mono">invoice-c-42</td><td>≤ 1 (queue)</td><td>-</td><td>1</td><td>2</td>'
        in text
    )
    assert '<td class="mono">pay-acme</td><td>-</td><td>2.5/s burst 3</td>' in text
    assert '<td class="mono">payments</td><td>0</td><td>1</td>' in text


async def test_the_keys_page_without_a_history_says_how_to_get_one(tmp_path: Path) -> None:
    console = Console(NO_KAFKA, WebOptions(db=tmp_path / "none.db"))
    async with TestClient(TestServer(console.app())) as client:
        page = await client.get("/keys")
        text = await page.text()
    assert page.status == 200 and "kafkron recorder" in text
