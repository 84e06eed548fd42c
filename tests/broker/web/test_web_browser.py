"""The web console in a real browser, on the real broker.

One namespace for the module: a scheduler, a worker (the demo's jobs and the
test jobs), a recorder and ``kafkron web`` run as child processes, and the demo's
catalog is submitted. Headless Chromium then clicks what a person would click;
every test saves a screenshot (see `tests.kit.browser.artifacts_dir`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from actors.cli.submit_cmd import encode, send_commands
from actors.demo import catalog
from actors.demo.run import send_broken_command
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.schedules import latest_states
from actors.views.tail import read_to_end
from tests.kit.browser import artifacts_dir, chromium, wait_for
from tests.kit.ports import free_port_block
from tests.kit.worker import ChildProcess, WorkerProcess
from topics.admin import create_topics, delete_topics
from topics.names import Settings, TopicKind

WEB_PORT = free_port_block(1)  # below the ephemeral range (tests.kit.ports)
pytestmark = pytest.mark.broker


@dataclass
class Console:
    settings: Settings
    url: str
    children: list[ChildProcess]

    def alive(self) -> None:
        for child in self.children:
            child.check_alive()

    def send(self, *commands: dict[str, object]) -> None:
        now_ms = time.time_ns() // 1_000_000
        records = [encode(command, now_ms) for command in commands]
        asyncio.run(send_commands(self.settings, records))

    def state(self, schedule_id: str) -> ScheduleState | None:
        topic = self.settings.topic(TopicKind.SCHEDULES)
        value = latest_states(asyncio.run(read_to_end(self.settings, topic))).get(schedule_id)
        return None if value is None else decode_schedule(value)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    tmp = tmp_path_factory.mktemp("console")
    settings = Settings.from_env(namespace=f"t-{uuid.uuid4().hex[:8]}")
    asyncio.run(create_topics(settings, partitions=3))
    db = str(tmp / "history.db")
    children: list[ChildProcess] = []
    try:
        children.append(
            ChildProcess(
                settings,
                tmp,
                "scheduler",
                ["scheduler", "--session-timeout-ms", "6000", "--heartbeat-ms", "1000"],
            )
        )
        children.append(
            WorkerProcess(
                settings, tmp, "worker", jobs=",".join((*catalog.JOB_MODULES, "tests.jobs.worker"))
            )
        )
        children.append(ChildProcess(settings, tmp, "recorder", ["recorder", "--db", db]))
        web = ChildProcess(settings, tmp, "web", ["web", "--port", str(WEB_PORT), "--db", db])
        children.append(web)
        console = Console(settings, f"http://127.0.0.1:{WEB_PORT}", children)
        built = [*catalog.schedules(time.time_ns() // 1_000_000), catalog.dag()]
        console.send(*(dict(command.body) for command in built))
        asyncio.run(send_broken_command(settings))  # the demo's typo, for the rejected page
        asyncio.run(web.wait_log("kafkron web: http://127.0.0.1", timeout_s=30))
        yield console
    finally:
        for child in children:
            child.stop()
        asyncio.run(delete_topics(settings))


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def shot(browser: webdriver.Chrome, name: str) -> Path:
    path = artifacts_dir() / f"{name}.png"
    assert browser.save_screenshot(str(path)), f"no screenshot saved at {path}"
    return path


def _open(browser: webdriver.Chrome, console: Console, path: str) -> None:
    console.alive()
    browser.get(console.url + path)


def _rows(browser: webdriver.Chrome, css: str, attribute: str) -> list[str]:
    return [e.get_attribute(attribute) or "" for e in browser.find_elements(By.CSS_SELECTOR, css)]


def test_schedules_page_lists_the_demo_schedules(
    console: Console, browser: webdriver.Chrome
) -> None:
    wanted = {c.id for c in catalog.schedules(0) if c.type == "schedule.upsert"}
    wanted.add(catalog.dag().id)

    def listed() -> set[str] | None:
        _open(browser, console, "/")
        ids = set(_rows(browser, "tr[data-schedule]", "data-schedule"))
        return ids if wanted <= ids else None

    ids = wait_for("every demo schedule on the schedules page", listed, 60)
    assert ids == wanted
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-schedule="invoice-nightly"]')
    assert "Europe/London" in row.text
    assert "GMT" in row.text or "BST" in row.text  # the next fires in local time too
    shot(browser, "schedules")


def test_replaying_a_dead_letter_makes_the_run_succeed(
    console: Console, browser: webdriver.Chrome
) -> None:
    console.send(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": "replay-me",
            "spec": {"every": "1h"},
            "job": {"name": "test.fail_until_attempt", "args": {"succeed_at": 3}},
            "retry": {"max_attempts": 2, "initial_s": 0.1, "jitter": "none"},
        },
        {"v": 1, "type": "schedule.trigger", "id": "replay-me"},
    )

    def dead_run() -> str | None:
        _open(browser, console, "/dlq")
        buttons = browser.find_elements(
            By.CSS_SELECTOR, 'tr[data-run^="replay-me@"] button[data-action="replay"]'
        )
        return buttons[0].get_attribute("data-subject") if buttons else None

    run_id = wait_for("replay-me dead-lettered on the DLQ page", dead_run, 60)
    assert run_id is not None
    shot(browser, "dlq")
    browser.find_element(
        By.CSS_SELECTOR, f'tr[data-run="{run_id}"] button[data-action="replay"]'
    ).click()
    wait_for("the sent note", lambda: bool(browser.find_elements(By.ID, "sent")), 30)
    assert "dlq.replay" in browser.find_element(By.ID, "sent").text

    def succeeded() -> bool:
        _open(browser, console, "/runs/" + quote(run_id, safe=""))
        found = browser.find_elements(By.ID, "run-status")
        return bool(found) and "succeeded" in found[0].text

    wait_for(f"{run_id} succeeded after the replay", succeeded, 60)
    attempts = _rows(browser, "tr[data-attempt]", "data-attempt")
    assert attempts == ["1", "2", "3"]  # two failures, then the replay's attempt
    assert "fails on purpose" in browser.find_element(By.ID, "attempts").text
    shot(browser, "run")


def test_pausing_from_the_console_stops_the_fires(
    console: Console, browser: webdriver.Chrome
) -> None:
    console.send(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": "pause-me",
            "spec": {"every": "1s"},
            "job": {"name": "test.noop", "args": {}},
        }
    )

    def fired() -> bool:
        state = console.state("pause-me")
        return state is not None and state.last_fired_ms is not None

    wait_for("pause-me firing", fired, 60)
    _open(browser, console, "/schedules/pause-me")
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
    # The click posts and is redirected; on a busy machine the new page comes later.
    wait_for("the sent note", lambda: bool(browser.find_elements(By.ID, "sent")), 30)
    assert "schedule.pause pause-me" in browser.find_element(By.ID, "sent").text

    def paused() -> bool:
        _open(browser, console, "/schedules/pause-me")
        return bool(browser.find_elements(By.ID, "paused"))

    wait_for("pause-me shown paused", paused, 30)
    before = console.state("pause-me")
    assert before is not None and before.paused
    time.sleep(3)  # three periods of the schedule: a live one would have fired thrice
    after = console.state("pause-me")
    assert after is not None and after.paused
    assert after.last_fired_ms == before.last_fired_ms
    assert browser.find_elements(By.CSS_SELECTOR, 'button[data-action="resume"]')
    shot(browser, "schedule")


def test_a_dag_run_page_draws_the_graph_with_task_states(
    console: Console, browser: webdriver.Chrome
) -> None:
    dag = catalog.dag()
    tasks = set(dag.body["tasks"])
    _open(browser, console, "/dags/" + dag.id)
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="trigger"]').click()
    wait_for("the sent note", lambda: bool(browser.find_elements(By.ID, "sent")), 30)
    assert "schedule.trigger" in browser.find_element(By.ID, "sent").text

    def all_succeeded() -> dict[str, str] | None:
        _open(browser, console, "/dags/" + dag.id)
        nodes = browser.find_elements(By.CSS_SELECTOR, "#dag-graph g.task")
        states = {
            n.get_attribute("data-task") or "": n.get_attribute("data-state") or "" for n in nodes
        }
        return states if states and set(states.values()) == {"succeeded"} else None

    states = wait_for("a nightly-billing run with every task succeeded", all_succeeded, 90)
    assert set(states) == tasks
    edges = browser.find_elements(By.CSS_SELECTOR, "#dag-graph path[marker-end]")
    assert len(edges) == sum(len(t.get("after", ())) for t in dag.body["tasks"].values())

    def run_result() -> str | None:  # the run's own result, once the recorder has it
        _open(browser, console, "/dags/" + dag.id)
        found = browser.find_elements(By.ID, "dag-result")
        text = found[0].text if found else ""
        return text if text.startswith("run result:") else None

    text = wait_for("the run-level result on the DAG page", run_result, 30)
    assert "succeeded" in text and f"tasks {len(tasks)} succeeded" in text
    shot(browser, "dag")


def test_when_will_it_run_spells_out_the_dst_rule(
    console: Console, browser: webdriver.Chrome
) -> None:
    _open(browser, console, "/next")
    box = browser.find_element(By.NAME, "spec")
    box.send_keys("30 1 * * *")
    browser.find_element(By.NAME, "tz").send_keys("Europe/London")
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    # The click starts a page load; reading at once can find the old page or none.
    wait_for(
        "the next fires of the spec",
        lambda: browser.find_elements(By.CSS_SELECTOR, "#fires tr td.mono"),
        30,
    )
    rule = wait_for("the DST rule", lambda: browser.find_elements(By.ID, "dst-rule"), 30)[0].text
    assert "fixed-time cron in Europe/London" in rule and "dst.gap: shift" in rule
    shot(browser, "next")


def test_rejected_page_says_why(console: Console, browser: webdriver.Chrome) -> None:
    def shown() -> str | None:
        _open(browser, console, "/rejected")
        table = browser.find_elements(By.ID, "rejected")
        return table[0].text if table and "typo-cron" in table[0].text else None

    text = wait_for("the broken command on the rejected page", shown, 60)
    assert "61" in text  # the reason names the bad minute
    shot(browser, "rejected")
