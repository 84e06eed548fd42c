"""The console's *Alerts* page reads the history database (no Kafka), and its DAG page
states a DAG's deadline."""

from __future__ import annotations

from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from actors.examples.billing.dag import DAG_ID, nightly_billing
from actors.history.store import HistoryStore
from actors.shard.state import decode_schedule
from actors.views.dag_view import dag_view
from actors.web.app import Console, WebOptions, _env
from actors.web.drawing import dag_graph
from tests.history.test_history_alerts import alert, rows_of
from tests.kit.shard import SECOND, Shard
from tests.web.test_web_console import NO_KAFKA
from topics.alerts import AlertType, DeadlineKind
from topics.timefmt import parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")


async def test_the_alerts_page_lists_the_open_ones_from_the_database(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    async with await HistoryStore.open(db, namespace=NO_KAFKA.namespace) as store:
        rows = rows_of(
            [
                alert("a", AlertType.MISSED, DeadlineKind.START, T0 + 10_000),
                alert("b", AlertType.MISSED, DeadlineKind.FINISH, T0 + 12_000),
                alert("a", AlertType.RECOVERED, DeadlineKind.START, T0 + 20_000),
            ]
        )
        await store.write(rows, {})
    console = Console(NO_KAFKA, WebOptions(db=db, token="s3cret"))
    async with TestClient(TestServer(console.app())) as client:
        page = await client.get("/alerts")
        text = await page.text()
    assert page.status == 200
    assert "etl@b" in text and "etl@a" not in text  # a's start was closed
    assert "No open alerts" not in text


async def test_without_a_history_the_alerts_page_says_so(tmp_path: Path) -> None:
    console = Console(NO_KAFKA, WebOptions(db=tmp_path / "none.db", token="s3cret"))
    async with TestClient(TestServer(console.app())) as client:
        page = await client.get("/alerts")
        text = await page.text()
    assert page.status == 200
    assert "kafkron recorder" in text and "No open alerts" not in text


def test_the_dag_page_states_the_deadline() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    body = nightly_billing()
    body["deadline"] = {"start_within_s": 60}
    assert not shard.send(body).rejected
    shard.run_until(T0)
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    view = dag_view(decode_schedule(value))
    page = _env().get_template("dag.html").render(
        ns="t", sent=None, failed=None, here="/", can_act=False, token_mode=False,
        view=view, graph=dag_graph(view), counts=None,
    )  # fmt: skip
    assert "deadline: each task starts within 60 s of becoming ready" in page
