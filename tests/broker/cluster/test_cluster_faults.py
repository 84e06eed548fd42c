"""Exactly once on a three-node cluster while brokers die (RF 3, min.insync.replicas 2).

Each scenario runs the same load on its own namespace of one shared three-node
cluster (started by the fixture with `kafkron broker start --nodes 3`): 300
every-second schedules, half of them produced with kcat, three schedulers and two
workers running a no-op job. Then one fault:

(a) SIGKILL of the broker leading the most ``{ns}.schedules`` partitions, back 20 s later;
(b) SIGSTOP of the active KRaft controller for 20 s;
(c) a rolling restart of the three brokers, one at a time, each back in sync first;
(d) one broker down for the whole window: two of three replicas in sync;
(e) a broker's disk lost: killed, its data deleted, started again (formatted with the
    cluster's id), and its replicas rebuilt by its peers.

The cluster is the session's (tests/broker/cluster/conftest.py): the one `.ci/run` started
if ``KAFKRON_CLUSTER_PORT`` names it, else one of the fixture's own.

The independent read_committed check of ``{ns}.runs`` and ``{ns}.results`` must show
no duplicate run, no unreported gap, nothing early, and exactly one visible result
per ``(run_id, attempt)``. Each prints how late the occurrence due right after the
fault became visible (a figure for the report, not an assertion: timings never are).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from actors.broker.cluster import lose_disk
from tests.kit.cluster import (
    SCHEDULES,
    SHARDS,
    Cluster,
    ClusterReport,
    Load,
    check,
    running_load,
    under_replicated,
)
from tests.kit.scheduler import now_ms
from topics.admin import check_topics, create_topics
from topics.names import Settings, TopicKind

pytestmark = [pytest.mark.broker, pytest.mark.cluster, pytest.mark.slow]

FAULT_S = 20


Fault = Callable[[Cluster, Load], Awaitable[list[int]]]


async def _scenario(
    cluster: Cluster,
    tmp_path: Path,
    name: str,
    fault: Fault,
    before_window: Callable[[], Awaitable[None]] | None = None,
) -> ClusterReport:
    settings = await cluster.healthy_namespace()
    await create_topics(settings, partitions=SHARDS)
    # RF 3, min.insync.replicas 2, unclean election off: the contract on a cluster.
    assert await check_topics(settings) == []
    async with running_load(settings, tmp_path, name) as load:
        if before_window is not None:
            await before_window()
        window_start_ms = now_ms() + 5_000
        await asyncio.sleep(10)
        faults_ms = await fault(cluster, load)
        await asyncio.sleep(10)
        window_end_ms = now_ms()
        caught_up = await load.progress.wait_caught_up(load.ids, window_end_ms, timeout_s=240)
        report = await check(
            load, window_start_ms=window_start_ms, window_end_ms=window_end_ms, faults_ms=faults_ms
        )
        logs = load.logs()
    window_s = (window_end_ms - window_start_ms) / 1000
    print(f"cluster {name}: window_s={window_s:.0f} caught_up={caught_up} {report.summary()}")
    assert caught_up, report.summary() + "\n" + logs
    assert report.runs.occurrences_checked >= SCHEDULES * 30
    assert not report.runs.duplicates, report.summary()
    assert not report.runs.early, report.summary()
    assert not report.runs.gaps, report.summary() + "\n" + logs
    assert not report.duplicate_results, report.summary()
    assert not report.unanswered, report.summary() + "\n" + logs
    # Read again: the logs now end with how each process stopped.
    assert load.scheduler_codes == [0, 0, 0], f"{load.scheduler_codes}\n{load.logs()}"
    assert load.worker_codes == [0, 0], f"{load.worker_codes}\n{load.logs()}"
    return report


async def _schedules_leader(cluster: Cluster, settings: Settings) -> int:
    """The node leading the most partitions of ``{ns}.schedules``."""
    view = await cluster.view()
    ((node, _),) = view.leaders(settings.topic(TopicKind.SCHEDULES)).most_common(1)
    return node


@pytest.mark.timeout(720)
async def test_a_kill_9_of_the_schedules_leader(cluster: Cluster, tmp_path: Path) -> None:
    async def fault(cluster: Cluster, load: Load) -> list[int]:
        node = await _schedules_leader(cluster, load.settings)
        await asyncio.to_thread(cluster.kill_node, node)
        killed_ms = now_ms()  # the command returns once the process is gone
        await asyncio.sleep(FAULT_S)
        await asyncio.to_thread(cluster.start_node, node)
        return [killed_ms]

    await _scenario(cluster, tmp_path, "a-kill", fault)


@pytest.mark.timeout(720)
async def test_b_sigstop_of_the_active_controller(cluster: Cluster, tmp_path: Path) -> None:
    async def fault(cluster: Cluster, load: Load) -> list[int]:
        controller = (await cluster.view()).active_controller
        assert controller is not None, "no active controller reported"
        pid = cluster.pid(controller)
        stopped_ms = now_ms()
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(FAULT_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        return [stopped_ms]

    await _scenario(cluster, tmp_path, "b-sigstop", fault)


@pytest.mark.timeout(900)
async def test_c_rolling_restart_under_load(cluster: Cluster, tmp_path: Path) -> None:
    async def fault(cluster: Cluster, load: Load) -> list[int]:
        stops = []
        for node in range(1, cluster.layout.nodes + 1):
            await asyncio.to_thread(cluster.stop_node, node)
            stops.append(now_ms())  # a clean stop returns once the node is down
            await asyncio.to_thread(cluster.start_node, node)
            await cluster.wait_healthy()  # back in sync before the next goes down
        return stops

    await _scenario(cluster, tmp_path, "c-rolling", fault)


@pytest.mark.timeout(720)
async def test_d_one_broker_down_for_the_whole_run(cluster: Cluster, tmp_path: Path) -> None:
    down = cluster.layout.nodes
    stopped_ms = 0

    async def stop_one() -> None:
        nonlocal stopped_ms
        stopped_ms = now_ms()
        await asyncio.to_thread(cluster.stop_node, down)

    async def stay_down(cluster: Cluster, load: Load) -> list[int]:
        await asyncio.sleep(FAULT_S)
        return [stopped_ms]

    # The processes settle with every node up (the group and transaction
    # coordinators exist), then one node stays down until the check is done.
    try:
        await _scenario(cluster, tmp_path, "d-one-down", stay_down, before_window=stop_one)
    finally:
        await asyncio.to_thread(cluster.start_node, down)


@pytest.mark.timeout(720)
async def test_e_a_lost_disk_is_rebuilt_from_the_replicas(cluster: Cluster, tmp_path: Path) -> None:
    async def fault(cluster: Cluster, load: Load) -> list[int]:
        node = await _schedules_leader(cluster, load.settings)
        await asyncio.to_thread(cluster.kill_node, node)
        killed_ms = now_ms()
        lose_disk(cluster.layout, node)
        await asyncio.sleep(5)
        await asyncio.to_thread(cluster.start_node, node)
        # Nothing lost: the node's replicas are rebuilt from its peers and rejoin the ISR.
        started = time.monotonic()
        await cluster.wait_healthy()
        print(f"cluster e: node {node} rebuilt in {time.monotonic() - started:.0f} s")
        return [killed_ms]

    await _scenario(cluster, tmp_path, "e-lost-disk", fault)
    assert await under_replicated(Settings(bootstrap=cluster.bootstrap)) == []
