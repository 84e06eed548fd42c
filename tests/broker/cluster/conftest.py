"""The three-node cluster's tests: ``tests/run.sh -m cluster`` (or ``pytest tests/broker/cluster``).

A group of their own (marker ``cluster``; ``tests/run.sh -m "not cluster"`` leaves them
out), run last by ``tests/run.sh``: the fault scenarios take about a minute and a half
each on a quiet two-core machine. ``.ci/run`` starts the cluster beforehand with
``kafkron broker start --nodes 3`` on ports of its own and names it in
``KAFKRON_CLUSTER_PORT`` (and ``KAFKRON_CLUSTER_DATA_DIR``); without them the session
fixture starts one on free ports and stops it at the end. They share the kits of `tests/kit/`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kit.cluster import Cluster, running_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running
