"""The web console without Kafka: its pictures, its DST sentences, who may act.

Pages that read Kafka are tested in a real browser (`test_web_browser`); here the
app answers requests that never reach the broker: the "when will it run?" box,
the sign-in, and actions refused before a command would be produced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

from actors.cli.web_cmd import is_loopback
from actors.history.store import AttemptView, HistoryStore
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.dag_view import dag_view
from actors.web import data
from actors.web.app import TOKEN_COOKIE, Console, WebOptions, _env, _local_path
from actors.web.drawing import NODE_W, bar_chart, dag_graph
from tests.dag.test_dag_cli import billing_state
from tests.kit.cli import cli
from tests.kit.history import HTTP_RUN, KAFKA_RUN, target_rows
from tests.kit.shard import Shard, command
from topics.names import Settings
from topics.targets import TargetTopic, TargetTopics
from topics.timefmt import parse_instant

# Nothing listens here: a request that reached Kafka would fail, not pass.
NO_KAFKA = Settings.from_env(namespace="t-web", bootstrap="127.0.0.1:1")


def test_the_dag_graph_puts_each_stage_in_a_column_with_an_edge_per_dependency() -> None:
    _, state = billing_state()
    graph = dag_graph(dag_view(state))
    x = {n.name: n.x for n in graph.nodes}
    assert x["usage-rollup"] == x["fx-rates"] < x["invoice-nightly"] < x["send-invoices"]
    assert len(graph.edges) == 3  # two into invoice-nightly, one into send-invoices
    states = {n.name: (n.state, n.fill) for n in graph.nodes}
    assert states["fx-rates"] == ("failed", "#f08080")
    assert states["send-invoices"][0] == "upstream_failed"
    assert graph.width >= 3 * NODE_W


def test_bar_charts_scale_to_the_largest_value_and_skip_unknowns() -> None:
    chart = bar_chart("lateness", [10, None, 40], ["a", "b", "c"], width=300, height=100)
    assert [b.label for b in chart.bars] == ["a: 10 ms", "c: 40 ms"]
    tallest = max(chart.bars, key=lambda b: b.height)
    assert tallest.label.startswith("c") and tallest.y + tallest.height == 100
    assert chart.bars[0].height == pytest.approx(tallest.height / 4)


def test_the_dst_rule_in_a_sentence() -> None:
    assert "every real instant" in data.dst_rule(
        {"cron": "*/15 * * * *", "tz": "Europe/Paris"}, None
    )
    assert "every real instant" in data.dst_rule({"cron": "@hourly", "tz": "Europe/Paris"}, None)
    fixed = data.dst_rule({"cron": "30 2 * * *", "tz": "America/New_York"}, {"gap": "skip"})
    assert "fixed-time cron in America/New_York" in fixed
    assert "does not fire that day (dst.gap: skip)" in fixed
    assert "fires once, at its first occurrence (dst.fold: once)" in fixed
    assert "never moves" in data.dst_rule({"every": "90s"}, None)
    assert "UTC has no daylight saving" in data.dst_rule({"cron": "0 3 * * *"}, None)


def test_when_will_it_run_shifts_a_wall_time_out_of_the_spring_gap() -> None:
    # 28 March 2027: London skips 01:00-02:00 local; 01:30 fires at 02:00 BST (01:00Z).
    fires, rule = data.when_will_it_run(
        "30 1 * * *", "Europe/London", 2, parse_instant("2027-03-27T12:00:00Z")
    )
    assert [f.utc for f in fires] == ["2027-03-28T01:00:00.000Z", "2027-03-29T00:30:00.000Z"]
    assert fires[0].local == "2027-03-28 02:00:00 BST"
    assert "dst.gap: shift" in rule


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    console = Console(NO_KAFKA, WebOptions(db=tmp_path / "none.db", token="s3cret"))
    async with TestClient(TestServer(console.app())) as test_client:
        yield test_client


async def test_the_next_box_answers_and_explains_bad_input(client: TestClient) -> None:
    page = await client.get("/next", params={"spec": "every 90s", "n": "3"})
    text = await page.text()
    assert page.status == 200
    assert text.count('<td class="mono">20') == 3  # three UTC instants
    assert "never moves" in text
    bad = await client.get("/next", params={"spec": "61 * * * *"})
    assert bad.status == 400
    assert 'id="next-error"' in await bad.text()


async def test_actions_need_the_token_and_refuse_other_sites(client: TestClient) -> None:
    refused = await client.post("/actions/pause", data={"id": "x"}, allow_redirects=False)
    assert refused.status == 403 and "/login" in await refused.text()
    wrong = await client.post("/login", data={"token": "guess"}, allow_redirects=False)
    assert wrong.status == 403
    signed = await client.post("/login", data={"token": "s3cret"}, allow_redirects=False)
    assert signed.status == 303 and TOKEN_COOKIE in signed.cookies
    cookie = signed.cookies[TOKEN_COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    cross_site = await client.post(
        "/actions/pause",
        data={"id": "x"},
        headers={"Origin": "https://elsewhere.example"},
        allow_redirects=False,
    )
    assert cross_site.status == 403
    # Signed in, same site: the command is validated before anything is sent.
    invalid = await client.post(
        "/actions/pause", data={"id": "a/b", "next": "https://evil.example/"}, allow_redirects=False
    )
    assert invalid.status == 303
    location = invalid.headers["Location"]
    assert location.startswith("/?failed=schedule.pause")  # back to this console, not away
    unknown = await client.post("/actions/explode", data={"id": "x"}, allow_redirects=False)
    assert unknown.status == 404


def test_redirects_stay_on_the_console() -> None:
    assert _local_path("/schedules/x?y=1") == "/schedules/x"
    for outside in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)", ""):
        assert _local_path(outside) == "/"


def test_web_refuses_to_listen_beyond_loopback_without_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAFKRON_WEB_TOKEN", raising=False)
    code, _, err = cli(capsys, "web", "--host", "0.0.0.0")
    assert code == 2 and "--token or KAFKRON_WEB_TOKEN" in err
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.8")


def test_the_dag_page_takes_the_run_level_result_of_the_attempt_that_ended() -> None:
    # The recorder holds the run's task attempts under their own run ids and the
    # run-level results (task null, with counts) under the run's: one per time it
    # ended (a dag.clear ends it again). The page shows the one its state names.
    def attempt(n: int, status: str, counts: str | None) -> AttemptView:
        return AttemptView(
            run_id="nightly@2026-12-01T00:00:00.000Z",
            attempt=n,
            schedule_id="nightly",
            task=None,
            scheduled_ms=1_000,
            fired_ms=1_000,
            started_ms=1_000,
            finished_ms=61_000 * n,
            status=status,
            worker="shard-2",
            error_type="TaskFailed" if status == "failed" else None,
            error_message="load failed" if status == "failed" else None,
            counts=counts,
        )

    attempts = [
        attempt(1, "failed", '{"succeeded": 2, "failed": 1}'),
        attempt(2, "succeeded", '{"succeeded": 3}'),
    ]
    assert data.dag_run_result(attempts, 3) is None  # not recorded yet
    first = data.dag_run_result(attempts, 1)
    assert first is not None
    assert (first.status, first.counts, first.error) == (
        "failed",
        {"succeeded": 2, "failed": 1},
        {"type": "TaskFailed", "message": "load failed"},
    )
    second = data.dag_run_result(attempts, 2)
    assert second is not None and (second.status, second.counts) == ("succeeded", {"succeeded": 3})
    assert second.finished_ms is not None and second.started_ms is not None
    assert data.dag_run_result([attempt(1, "running", None)], 1) is None  # a task's progress


def _target_state(schedule_id: str, target: dict[str, object]) -> ScheduleState:
    shard = Shard()
    shard.core.set_target_topics(
        TargetTopics(allowed=("orders.*",), known={"orders.due": TargetTopic(3)})
    )
    body = command("schedule.upsert", schedule_id, spec={"every": "1h"}, target=target)
    shard.send(body)
    value = shard.changelog[schedule_id.encode()]
    assert value is not None, shard.rejected
    return decode_schedule(value)


def test_a_target_schedule_shows_where_it_goes_instead_of_its_carrier_job() -> None:
    kafka = data.row_of(_target_state("order-due", {"kafka": {"topic": "orders.due", "value": 1}}))
    assert kafka.job == "→ kafka:orders.due"
    http = data.row_of(_target_state("hook", {"http": {"url": "https://e.example/h"}}))
    assert http.job == "→ POST https://e.example/h"


@pytest.fixture
async def target_client(tmp_path: Path) -> AsyncIterator[TestClient]:
    db = tmp_path / "history.db"
    async with await HistoryStore.open(db, namespace=NO_KAFKA.namespace) as store:
        await store.write(target_rows(), {})
    console = Console(NO_KAFKA, WebOptions(db=db, token="s3cret"))
    async with TestClient(TestServer(console.app())) as test_client:
        yield test_client


async def test_target_runs_show_their_target_and_what_it_did(target_client: TestClient) -> None:
    page = await target_client.get(f"/runs/{quote(HTTP_RUN, safe='')}")
    text = await page.text()
    assert page.status == 200
    assert "→ POST https://billing.example/charge" in text
    assert "<th>target</th>" in text and "HTTP 200 in 41 ms" in text
    page = await target_client.get(f"/runs/{quote(KAFKA_RUN, safe='')}")
    text = await page.text()
    assert "→ kafka:orders.due" in text and "kafka:orders.due[3]" in text
    dead = await (await target_client.get("/dlq")).text()
    assert "→ kafka:orders.due" in dead and "kafkron.kafka" not in dead


async def test_the_schedule_page_gives_its_target_runs_a_target_column(tmp_path: Path) -> None:
    # The page's changelog half needs Kafka; its runs half is the template over the history.
    async with await HistoryStore.open(tmp_path / "h.db", namespace="t") as store:
        await store.write(target_rows(), {})
        runs = await store.runs(limit=10)
    page = _env().get_template("schedule.html").render(
        ns="t", sent=None, failed=None, here="/", can_act=False, token_mode=False,
        schedule_id="order-due", row=None, definition="{}", dst=None, runs=runs, charts=[],
        history_error=None,
    )  # fmt: skip
    assert "<th>target</th>" in page
    assert "→ kafka:orders.due[3]" in page
    assert "→ POST https://billing.example/charge · HTTP 200 in 41 ms" in page
