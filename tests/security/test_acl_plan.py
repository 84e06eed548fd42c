"""The least-privilege ACL plan: what each role may do, and what it may not."""

from __future__ import annotations

import re

import pytest

from actors.history.recorder import RECORDED_KINDS
from tests.kit.paths import REPO
from topics.acl_plan import (
    TXN_ROLES,
    Acl,
    Operation,
    PatternType,
    ResourceType,
    Role,
    check_namespace,
    commands,
    granting_roles,
    markdown_table,
    migration,
    plan,
    shell_commands,
)
from topics.names import Settings, TopicKind, TxnIds
from topics.refusals import denial_message

NS = "billing"
S = Settings(namespace=NS)
T = ResourceType.TOPIC
READ, WRITE = Operation.READ, Operation.WRITE


def allowed(role: Role, resource: ResourceType, name: str, op: Operation, ns: str = NS) -> bool:
    return any(acl.matches(resource, name, op) for acl in plan(role, ns))


def test_submitter_writes_commands_and_reads_rejected_only() -> None:
    topics = {(a.name, a.operation) for a in plan(Role.SUBMITTER, NS)}
    assert topics == {(S.topic(TopicKind.COMMANDS), WRITE), (S.topic(TopicKind.REJECTED), READ)}
    for kind in (TopicKind.RUNS, TopicKind.SCHEDULES, TopicKind.DLQ, TopicKind.RESULTS):
        assert not allowed(Role.SUBMITTER, T, S.topic(kind), WRITE)


def test_worker_reads_runs_writes_results_with_its_own_transactional_ids() -> None:
    worker = plan(Role.WORKER, NS)
    writes = {a.name for a in worker if a.resource is T and a.operation is WRITE}
    assert writes == {S.topic(TopicKind.RESULTS)}
    assert allowed(Role.WORKER, T, S.topic(TopicKind.RUNS), READ)
    assert allowed(Role.WORKER, T, S.topic(TopicKind.RATELIMITS), READ)  # the pauses (§8.5)
    assert allowed(Role.WORKER, ResourceType.GROUP, S.worker_group, READ)
    assert allowed(Role.WORKER, ResourceType.TRANSACTIONAL_ID, S.worker_transactional_id(7), WRITE)
    assert not allowed(
        Role.WORKER, ResourceType.TRANSACTIONAL_ID, S.shard_transactional_id(0), WRITE
    )
    assert not allowed(Role.WORKER, T, S.topic(TopicKind.SCHEDULES), WRITE)
    assert not allowed(Role.WORKER, ResourceType.GROUP, S.scheduler_group, READ)


def test_only_the_scheduler_writes_schedules_runs_and_dlq() -> None:
    for kind in (TopicKind.SCHEDULES, TopicKind.RUNS, TopicKind.DLQ):
        assert granting_roles(NS, T, S.topic(kind), WRITE) == [Role.SCHEDULER]
    assert allowed(
        Role.SCHEDULER, ResourceType.TRANSACTIONAL_ID, S.shard_transactional_id(5), WRITE
    )


def test_no_role_holds_a_cluster_acl_or_a_wildcard() -> None:
    for role in Role:
        for acl in plan(role, NS):
            assert acl.name not in ("*", "")
            if acl.pattern is PatternType.PREFIXED:
                assert acl.resource is ResourceType.TRANSACTIONAL_ID


@pytest.mark.parametrize("role", list(Role))
def test_a_tenant_reaches_nothing_of_another_namespace(role: Role) -> None:
    other = Settings(namespace="billing2")  # shares a prefix with "billing"
    names = [other.topic(kind) for kind in TopicKind]
    groups = [other.scheduler_group, other.worker_group, other.recorder_group]
    txns = [other.shard_transactional_id(0), other.worker_transactional_id(0)]
    for op in Operation:
        assert not any(allowed(role, T, name, op) for name in names)
        assert not any(allowed(role, ResourceType.GROUP, g, op) for g in groups)
        assert not any(allowed(role, ResourceType.TRANSACTIONAL_ID, t, op) for t in txns)


def test_read_and_write_imply_describe_but_not_each_other() -> None:
    acl = Acl(T, PatternType.LITERAL, "billing.runs", WRITE)
    assert acl.matches(T, "billing.runs", Operation.DESCRIBE)
    assert not acl.matches(T, "billing.runs", READ)


@pytest.mark.parametrize("role", list(Role))
def test_tool_commands_grant_exactly_the_plan(role: Role) -> None:
    granted = {
        (resource, command.pattern, name, op)
        for command in commands(plan(role, NS))
        for resource, name in command.resources
        for op in command.operations
    }
    expected = {(a.resource, a.pattern, a.name, a.operation) for a in plan(role, NS)}
    assert granted == expected


def test_shell_commands_use_kafkas_acl_tool() -> None:
    lines = shell_commands(Role.WORKER, NS, "User:w1", "broker:9093")
    assert lines[0].startswith("kafka-acls.sh --bootstrap-server broker:9093 --command-config ")
    assert any(
        "--transactional-id billing.worker. --resource-pattern-type prefixed" in x for x in lines
    )
    assert all("--allow-principal User:w1" in line for line in lines)


def test_namespaces_with_a_dot_are_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("no '.'")):
        check_namespace("a.b")
    with pytest.raises(ValueError):
        plan(Role.VIEWER, "")
    assert check_namespace("demo-1f2e") == "demo-1f2e"


def test_denial_names_operation_resource_and_narrowest_role() -> None:
    text = denial_message(NS, T, "billing.runs", WRITE, principal="User:alice")
    assert text.startswith("User:alice may not Write topic billing.runs")
    assert "role scheduler" in text
    read = denial_message(NS, T, "billing.schedules", READ, principal="User:w")
    # The recorder reads the changelog with fewer grants than the viewer, but it is a
    # service's role (its consumer group): a person is pointed at the viewer.
    assert "--role viewer --namespace billing" in read
    foreign = denial_message(NS, T, "other.runs", WRITE, principal="User:w")
    assert "no kafkron role of namespace billing" in foreign


def test_the_markdown_table_has_one_row_per_role_and_resource() -> None:
    table = markdown_table(NS)
    assert table.splitlines()[0] == "| role | resource | pattern | name | operations |"
    assert "| worker | transactional-id | prefixed | `billing.worker.` | Write, Describe |" in (
        table.replace("Describe, Write", "Write, Describe")
    )


def test_the_readme_table_is_the_plan() -> None:
    readme = (REPO / "README.md").read_text()
    table = markdown_table("NS").replace("`NS.", "`{ns}.").replace("`NS-", "`{ns}-")
    assert table in readme, "regenerate the README's ACL table from topics.acl_plan"


# A namespace and the look-alikes a role suffix builds from it: each must be fenced
# from every other, whatever role or id kind (the '-' of the ids before 0.2 let
# X's worker take X-worker's shard ids).
LOOK_ALIKES = [
    "X",
    "X-worker",
    "X-shard",
    "X-worker-shard",
    "X-shard-0",
    "X-worker-0",
    "X-workers",
    "X-schedulers",
    "X-recorder",
    "X-cli",
    "X_worker",
    "X-",
]


def _resources(ns: str) -> list[tuple[ResourceType, str]]:
    """Every topic, group and transactional id (both forms) namespace `ns` uses."""
    s = Settings(namespace=ns)
    out = [(T, s.topic(kind)) for kind in TopicKind]
    out += [(ResourceType.GROUP, g) for g in (s.scheduler_group, s.worker_group, s.recorder_group)]
    for mode in TxnIds:
        form = Settings(namespace=ns, txn_ids=mode)
        for p in (0, 1, 10):
            out += [
                (ResourceType.TRANSACTIONAL_ID, form.shard_transactional_id(p)),
                (ResourceType.TRANSACTIONAL_ID, form.worker_transactional_id(p)),
            ]
    return out


@pytest.mark.parametrize("ns", LOOK_ALIKES)
def test_no_role_reaches_a_look_alike_namespace(ns: str) -> None:
    reached = [
        (role.value, other, resource.value, name, op.value)
        for role in Role
        for acl in plan(role, ns)
        for other in LOOK_ALIKES
        if other != ns
        for resource, name in _resources(other)
        for op in Operation
        if acl.matches(resource, name, op)
    ]
    assert reached == []


def test_each_transactional_role_holds_its_own_ids_in_both_modes_only_by_the_new_prefix() -> None:
    for role, kind in TXN_ROLES.items():
        new, old = f"{NS}.{kind}.3", f"{NS}-{kind}-3"
        assert Settings(namespace=NS).fenced_ids(kind, 3) == (new,)  # no other form fenced
        assert Settings(namespace=NS, txn_ids=TxnIds.LEGACY).fenced_ids(kind, 3) == (old, new)
        assert Settings(namespace=NS, txn_ids=TxnIds.MIGRATE).fenced_ids(kind, 3) == (new, old)
        assert allowed(role, ResourceType.TRANSACTIONAL_ID, new, WRITE)
        # The old form is granted only while an upgrade runs (`acl plan --migrate`).
        assert not allowed(role, ResourceType.TRANSACTIONAL_ID, old, WRITE)


def test_the_migration_adds_the_new_prefix_and_then_removes_the_old() -> None:
    change = migration(Role.WORKER, NS)
    assert {(a.pattern, a.name) for a in change.add} == {(PatternType.PREFIXED, "billing.worker.")}
    assert {(a.pattern, a.name) for a in change.remove} == {
        (PatternType.PREFIXED, "billing-worker-")
    }
    assert set(change.add) <= set(plan(Role.WORKER, NS))
    assert migration(Role.SUBMITTER, NS).add == ()
    lines = shell_commands(Role.WORKER, NS, "User:w", "b:9093", change.remove, remove=True)
    assert all(" --remove --force --allow-principal User:w " in line for line in lines)
    assert any("--transactional-id billing-worker- " in line for line in lines)


def test_an_unknown_transactional_id_mode_names_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_TRANSACTIONAL_IDS", "old")
    with pytest.raises(ValueError, match=r"'tenant' .*, 'legacy' or 'migrate'"):
        Settings.from_env()
    monkeypatch.setenv("KAFKRON_TRANSACTIONAL_IDS", "legacy")
    assert Settings.from_env().txn_ids is TxnIds.LEGACY


def test_the_recorder_may_read_every_topic_it_records() -> None:
    # The recorder subscribes to RECORDED_KINDS; one kind added there without its
    # grant (the calendars, for the audit of named calendars) stops a secure recorder.
    for kind in RECORDED_KINDS:
        assert allowed(Role.RECORDER, T, S.topic(kind), READ), kind
