"""Every Kafka client of the product is built from `topics.clients`.

A client built by hand silently misses what a replicated cluster needs (acks=all,
idempotence, request and metadata timeouts, read_committed, the TLS/SASL
settings), so the rule is checked on the source, not remembered.
"""

from __future__ import annotations

import ast
from pathlib import Path

import topics.clients
from tests.kit.paths import REPO

PRODUCT_PACKAGES = ("actors", "topics", "simulation")
CLIENT_CLASSES = {"AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient"}
BUILDERS = {
    name
    for name, value in vars(topics.clients).items()
    if name.endswith("_kwargs")
    and not name.startswith("_")
    and getattr(value, "__module__", None) == topics.clients.__name__
}


def _client_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in CLIENT_CLASSES
    ]


def _built_from_clients(call: ast.Call) -> bool:
    """The call's settings come from one ``**builder(...)`` of `topics.clients`; extra
    keywords are the call site's own tuning (the builders refuse a fixed key)."""
    spreads = [k.value for k in call.keywords if k.arg is None]
    return (
        not call.args
        and len(spreads) == 1
        and isinstance(spreads[0], ast.Call)
        and isinstance(spreads[0].func, ast.Name)
        and spreads[0].func.id in BUILDERS
    )


def hand_built_clients(root: Path) -> list[str]:
    found = []
    for package in PRODUCT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for call in _client_calls(path):
                if not _built_from_clients(call):
                    found.append(f"{path.relative_to(root)}:{call.lineno}")
    return found


def test_builders_are_found() -> None:
    assert {"producer_kwargs", "consumer_kwargs", "admin_kwargs"} <= BUILDERS


def test_every_product_client_is_built_from_topics_clients() -> None:
    assert hand_built_clients(REPO) == []


def test_a_hand_built_client_is_caught(tmp_path: Path) -> None:
    planted = tmp_path / "actors" / "planted.py"
    planted.parent.mkdir()
    planted.write_text(
        "from aiokafka import AIOKafkaProducer\n"
        "def make(bootstrap):\n"
        "    return AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1)\n",
        encoding="utf-8",
    )
    for package in PRODUCT_PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert hand_built_clients(tmp_path) == ["actors/planted.py:3"]
