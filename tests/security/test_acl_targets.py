"""The scheduler's ACLs on Kafka target topics: exactly the allowed ones, as the shard allows.

``--target-topic NAME`` is one LITERAL topic, ``PREFIX*`` a PREFIXED one, the two
pattern kinds of both Kafka's ACLs and the shard's own check; the scheduler gets
Write (the record), Describe and DescribeConfigs (partitions, max.message.bytes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kit.cli import cli
from topics.acl_plan import (
    Acl,
    Operation,
    PatternType,
    ResourceType,
    Role,
    granting_roles,
    plan,
    shell_commands,
)
from topics.target_patterns import allowed

NS = "shop"
TARGETS = ("orders.due", "billing-out.*")
TARGET_OPS = (Operation.WRITE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)


def _on_targets(acls: tuple[Acl, ...]) -> set[Acl]:
    return {a for a in acls if a.resource is ResourceType.TOPIC and not a.name.startswith(NS)}


def test_the_scheduler_gets_write_and_describes_on_each_target_topic() -> None:
    acls = plan(Role.SCHEDULER, NS, TARGETS)
    assert _on_targets(acls) == {
        *(Acl(ResourceType.TOPIC, PatternType.LITERAL, "orders.due", op) for op in TARGET_OPS),
        *(Acl(ResourceType.TOPIC, PatternType.PREFIXED, "billing-out.", op) for op in TARGET_OPS),
    }
    assert set(plan(Role.SCHEDULER, NS)) == set(acls) - _on_targets(acls)


@pytest.mark.parametrize("role", [r for r in Role if r is not Role.SCHEDULER])
def test_no_other_role_gains_anything(role: Role) -> None:
    assert plan(role, NS, TARGETS) == plan(role, NS)


@pytest.mark.parametrize(
    "topic",
    ["orders.due", "billing-out.a", "billing-out.", "orders.due2", "orders", "billing-outx", "x"],
)
def test_the_grants_cover_exactly_the_topics_the_shard_allows(topic: str) -> None:
    own = f"{NS}."
    granted = Role.SCHEDULER in granting_roles(NS, ResourceType.TOPIC, topic, Operation.WRITE)
    acls = plan(Role.SCHEDULER, NS, TARGETS)
    by_targets = any(a.matches(ResourceType.TOPIC, topic, Operation.WRITE) for a in acls)
    assert not granted  # granting_roles knows no targets: the README's table is without
    assert by_targets == allowed(topic, TARGETS, own)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("a b", "a topic name, or a prefix ending in '*'"),
        ("*", "a topic name, or a prefix ending in '*'"),
        ("__consumer_offsets", "never a target"),
        ("__*", "never a target"),
        ("shop.runs", "never a target"),
        ("sh*", "never a target"),  # would cover shop.* and every shopX.*
    ],
)
def test_a_pattern_the_shard_would_never_use_is_refused(pattern: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("*", r"\*").replace("(", r"\(")):
        plan(Role.SCHEDULER, NS, (pattern,))


def test_the_commands_grant_targets_literal_and_prefixed() -> None:
    lines = shell_commands(Role.SCHEDULER, NS, "User:sched", "b:9092", target_topics=TARGETS)
    ops = "--operation Describe --operation DescribeConfigs --operation Write"
    assert any(f"{ops} --topic orders.due --resource-pattern-type literal" in ln for ln in lines)
    assert any(f"{ops} --topic billing-out. --resource-pattern-type prefixed" in ln for ln in lines)


def test_acl_plan_target_topic_in_the_table_json_and_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("acl", "plan", "--namespace", NS, "--target-topic", "orders.due")
    code, out, err = cli(capsys, *args, "--target-topic", "billing-out.*")
    assert code == 0, err
    rows = [line.split(None, 4) for line in out.splitlines()]
    assert [
        "scheduler",
        "topic",
        "literal",
        "orders.due",
        "Describe, DescribeConfigs, Write",
    ] in rows
    assert [
        "scheduler",
        "topic",
        "prefixed",
        "billing-out.",
        "Describe, DescribeConfigs, Write",
    ] in rows
    assert "--topic billing-out. --resource-pattern-type prefixed" in out
    code, out, _ = cli(capsys, *args, "--json")
    assert code == 0
    granted = json.loads(out)
    assert {"resource": "topic", "pattern": "literal", "name": "orders.due",
            "operation": "DescribeConfigs"} in granted["scheduler"]  # fmt: skip
    assert all(a["name"] != "orders.due" for a in granted["worker"])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("acl", "plan", "--role", "worker", "--target-topic", "orders.due"), "not worker"),
        (("acl", "plan", "--target-topic", "__x"), "never a target"),
        (("acl", "plan", "--target-topic", "a b"), "a topic name"),
    ],
)
def test_acl_plan_refuses_a_target_topic_it_cannot_grant(
    argv: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, *argv, "--namespace", NS)
    assert code == 2 and says in err and out == ""


@pytest.mark.parametrize(
    ("role", "pattern", "says"),
    [("submitter", "orders.due", "not submitter"), ("scheduler", "shop.x", "never a target")],
)
def test_users_add_refuses_a_target_topic_before_touching_anything(
    role: str, pattern: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    password = tmp_path / "pw"
    code, _, err = cli(
        capsys, "users", "add", "bob", "--role", role, "--namespace", NS,
        "--password-file", str(password), "--target-topic", pattern,
    )  # fmt: skip
    assert code == 2 and says in err
    assert not password.exists()
