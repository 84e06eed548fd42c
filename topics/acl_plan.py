"""Least privilege of every kafkron role, as Kafka ACLs: a pure plan, no I/O.

Each role of a namespace ``{ns}`` gets exactly the ACLs its actor's clients use,
nothing else. Topics and groups are LITERAL patterns (``{ns}.commands``,
``{ns}-workers``): a PREFIXED ``{ns}.`` topic pattern would also match the topics of
a namespace named ``{ns}.x``, so a tenant could read another's. Transactional ids are
PREFIXED (``{ns}.shard.``, ``{ns}.worker.``) because there is one per partition.

Why the ``.`` in a transactional id. A prefix grant is safe only if no other tenant's
id starts with it. Namespaces may contain ``-`` (and never ``.``), so the ids of
releases before 0.2, ``{ns}-worker-{p}`` under the prefix ``{ns}-worker-``, were not:
namespace ``X-worker``'s scheduler id ``X-worker-shard-0`` starts with tenant ``X``'s
worker prefix, and ``X``'s worker could take it and fence ``X-worker``'s shard 0.
With ``.`` after the namespace, every id starting ``X.`` belongs to namespace ``X``
alone, whatever the role suffix: ``X.worker.`` can only match ``X``'s own worker ids.
A reserved-suffix rule would have refused existing namespaces, and literal ids per
partition would tie the grants to a partition count that ``kafka-topics --alter``
can change.

Kafka targets. A scheduler writes a Kafka target's record itself, so it needs Write
on each topic its namespace allows (``--target-topic NAME`` or ``PREFIX*``), and
Describe and DescribeConfigs to read the topic's partitions and max.message.bytes
(`actors.scheduler.target_table`): LITERAL for a name, PREFIXED for ``PREFIX*``, the
two pattern kinds the shard's own check has (`topics.targets.allowed`), so the ACLs
grant exactly what the shard may use. `plan` adds them to the scheduler's when given.

`migration` gives the grants of the upgrade from the ``-`` ids: in its two middle
steps each process also fences the other form (`topics.names.TxnIds`), so a
principal needs the new prefix before its first 0.2 process starts, and loses the
old one only once no process commits with it or fences it (README, "Upgrading the
transactional ids").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from topics.names import Settings, TopicKind
from topics.queues import DEFAULT_QUEUE
from topics.target_patterns import check_pattern

NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


class Role(StrEnum):
    SCHEDULER = "scheduler"
    WORKER = "worker"
    RECORDER = "recorder"
    SUBMITTER = "submitter"
    VIEWER = "viewer"


class ResourceType(StrEnum):
    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional-id"


class PatternType(StrEnum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


class Operation(StrEnum):
    READ = "Read"
    WRITE = "Write"
    DESCRIBE = "Describe"
    DESCRIBE_CONFIGS = "DescribeConfigs"


# Operations of the plan that imply Describe on the same resource (Kafka's rule:
# Read, Write, Delete and Alter do; DescribeConfigs implies nothing).
_IMPLIES_DESCRIBE = frozenset({Operation.READ, Operation.WRITE})


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ALLOW entry: `operation` on the resource(s) `name` matches under `pattern`."""

    resource: ResourceType
    pattern: PatternType
    name: str
    operation: Operation

    def matches(self, resource: ResourceType, name: str, operation: Operation) -> bool:
        if resource is not self.resource:
            return False
        if self.pattern is PatternType.LITERAL:
            named = name == self.name
        else:
            named = name.startswith(self.name)
        if not named:
            return False
        if operation is self.operation:
            return True
        return operation is Operation.DESCRIBE and self.operation in _IMPLIES_DESCRIBE


def check_namespace(namespace: str) -> str:
    """`namespace` if it is a tenant name ACLs can fence; ValueError saying why otherwise.

    No dots: a topic ``a.b.commands`` must belong to exactly one namespace.
    """
    if not NAMESPACE_PATTERN.fullmatch(namespace):
        raise ValueError(
            f"namespace {namespace!r} must be 1-100 letters, digits, '-' or '_' and start"
            " with a letter or digit (no '.': it separates namespace and topic)"
        )
    return namespace


def _topics(settings: Settings, kinds: Sequence[TopicKind], *ops: Operation) -> list[Acl]:
    return [
        Acl(ResourceType.TOPIC, PatternType.LITERAL, settings.topic(kind), op)
        for kind in kinds
        for op in ops
    ]


def target_acls(target_topics: Sequence[str], namespace: str) -> list[Acl]:
    """The scheduler's ACLs on its allowed target topics (``NAME`` or ``PREFIX*``);
    ValueError naming a pattern that is not one, or that would cover topics the shard
    never writes a target to: Kafka's internal ones and the namespace's own (a prefix
    of ``{ns}.`` would also cover every namespace whose name starts the same)."""
    acls: list[Acl] = []
    own = f"{namespace}."
    for pattern in target_topics:
        check_pattern(pattern)
        name = pattern.rstrip("*")
        covers_own = own.startswith(name) if pattern.endswith("*") else False
        if name.startswith("__") or name.startswith(own) or covers_own:
            raise ValueError(
                f"target topic pattern {pattern!r} covers Kafka's internal topics or the"
                f" namespace's own ({own}*), which are never a target; name the target"
                " topics themselves"
            )
        kind = PatternType.PREFIXED if pattern.endswith("*") else PatternType.LITERAL
        name = pattern[:-1] if kind is PatternType.PREFIXED else pattern
        acls += [
            Acl(ResourceType.TOPIC, kind, name, op)
            for op in (Operation.WRITE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)
        ]
    return acls


def plan(
    role: Role, namespace: str, target_topics: Sequence[str] = (), queues: Sequence[str] = ()
) -> tuple[Acl, ...]:
    """Every ALLOW ACL `role` needs in `namespace`, sorted, without duplicates; a
    scheduler's also cover `target_topics` (`target_acls`), which no other role uses.

    ``queues``: worker queues (`topics.queues`), granted one by one (literal names,
    never a prefix: a worker of one queue reads that queue's topic and no other's).
    The scheduler writes and describes each queue's topic; a worker given queues
    reads those topics in their groups instead of ``{ns}.runs`` (name ``default``
    to keep it); the recorder and the viewer read them too."""
    s = Settings(namespace=check_namespace(namespace))
    k = TopicKind
    # A high lane's placement (``Q.hi``) is granted as a queue (docs/DESIGN.md §8.4).
    named = [s.for_placement(q) for q in dict.fromkeys(queues)]
    extra = [q for q in named if q.queue != DEFAULT_QUEUE or q.lane]
    read, write, describe = Operation.READ, Operation.WRITE, Operation.DESCRIBE
    acls: list[Acl] = []
    if role is Role.SCHEDULER:
        acls += _topics(s, (k.COMMANDS, k.RESULTS, k.SCHEDULES, k.CALENDARS), read)
        # Every topic: changelog, runs, dead letters, rejections, forwarded commands and
        # the failed results of oversize runs; DescribeConfigs reads max.message.bytes.
        acls += _topics(s, tuple(k), write, Operation.DESCRIBE_CONFIGS)
        acls.append(Acl(ResourceType.GROUP, PatternType.LITERAL, s.scheduler_group, read))
        acls += _txn(txn_prefix(s.namespace, "shard"))
        acls += target_acls(target_topics, s.namespace)
        for q in extra:
            acls += _topics(q, (k.RUNS,), write, describe, Operation.DESCRIBE_CONFIGS)
    elif role is Role.WORKER:
        for q in named or [s]:
            acls += _topics(q, (k.RUNS,), read)
            acls.append(Acl(ResourceType.GROUP, PatternType.LITERAL, q.worker_group, read))
        acls += _topics(s, (k.RESULTS,), write)
        acls += _topics(s, (k.RATELIMITS,), read)  # the rate-limit pauses, read whole (§8.5)
        # ``{ns}.worker.`` covers every queue's ids too: ``{ns}.worker.Q.{p}``.
        acls += _txn(txn_prefix(s.namespace, "worker"))
    elif role is Role.RECORDER:
        # The changelog too: each schedule's definitions over time, for the audit;
        # the deadline alerts, which the console and `kafkron alerts` read from it; and
        # the calendars, so the audit judges an instant by the calendar then in effect.
        kinds = (k.RUNS, k.RESULTS, k.DLQ, k.REJECTED, k.SCHEDULES, k.CALENDARS, k.ALERTS)
        acls += _topics(s, kinds, read)
        acls.append(Acl(ResourceType.GROUP, PatternType.LITERAL, s.recorder_group, read))
        for q in extra:
            acls += _topics(q, (k.RUNS,), read)
    elif role is Role.SUBMITTER:
        acls += _topics(s, (k.COMMANDS,), write)
        acls += _topics(s, (k.REJECTED,), read)
    elif role is Role.VIEWER:
        acls += _topics(s, tuple(k), read)
        for group in (s.scheduler_group, s.worker_group, s.recorder_group):
            acls.append(Acl(ResourceType.GROUP, PatternType.LITERAL, group, describe))
        for q in extra:
            acls += _topics(q, (k.RUNS,), read)
            acls.append(Acl(ResourceType.GROUP, PatternType.LITERAL, q.worker_group, describe))
    return tuple(sorted(set(acls)))


def txn_prefix(namespace: str, role: str, *, legacy: bool = False) -> str:
    """The prefix of `role`'s (``shard`` or ``worker``) transactional ids in `namespace`."""
    return f"{namespace}-{role}-" if legacy else f"{namespace}.{role}."


# The roles that hold transactional ids, and the kind of id each holds.
TXN_ROLES = {Role.SCHEDULER: "shard", Role.WORKER: "worker"}


@dataclass(frozen=True, slots=True)
class Migration:
    """The ACL changes of an upgrade from the ``-`` ids: `add` before the first new
    process starts, `remove` once every process runs with ``tenant`` ids."""

    add: tuple[Acl, ...]
    remove: tuple[Acl, ...]


def migration(role: Role, namespace: str) -> Migration:
    """What `role` gains and loses in `namespace` moving to ``{ns}.{role}.`` ids."""
    kind = TXN_ROLES.get(role)
    if kind is None:
        return Migration((), ())
    check_namespace(namespace)
    return Migration(
        tuple(sorted(_txn(txn_prefix(namespace, kind)))),
        tuple(sorted(_txn(txn_prefix(namespace, kind, legacy=True)))),
    )


def _txn(prefix: str) -> list[Acl]:
    return [
        Acl(ResourceType.TRANSACTIONAL_ID, PatternType.PREFIXED, prefix, op)
        for op in (Operation.WRITE, Operation.DESCRIBE)
    ]


def granting_roles(
    namespace: str, resource: ResourceType, name: str, operation: Operation
) -> list[Role]:
    """The roles of `namespace` whose plan allows `operation` on the resource `name`."""
    return [
        r for r in Role if any(a.matches(resource, name, operation) for a in plan(r, namespace))
    ]


@dataclass(frozen=True, slots=True)
class AclCommand:
    """One invocation of Kafka's ACL tool: these operations on these resources."""

    pattern: PatternType
    operations: tuple[Operation, ...]
    resources: tuple[tuple[ResourceType, str], ...]

    def arguments(self, principal: str) -> list[str]:
        """The tool's arguments after ``--bootstrap-server ... --command-config ...``."""
        args = ["--add", "--allow-principal", principal]
        for op in self.operations:
            args += ["--operation", op.value]
        for resource, name in self.resources:
            args += [f"--{resource.value}", name]
        args += ["--resource-pattern-type", self.pattern.value]
        return args


def commands(acls: Sequence[Acl]) -> list[AclCommand]:
    """As few tool invocations as apply `acls` exactly.

    The tool grants every operation it is given on every resource it is given, so
    resources are grouped by (pattern, exact operation set); the plan's operations are
    valid for each resource type they are paired with.
    """
    ops: dict[tuple[PatternType, ResourceType, str], set[Operation]] = {}
    for acl in acls:
        ops.setdefault((acl.pattern, acl.resource, acl.name), set()).add(acl.operation)
    grouped: dict[tuple[PatternType, tuple[Operation, ...]], list[tuple[ResourceType, str]]] = {}
    for (pattern, resource, name), op_set in sorted(ops.items()):
        key = (pattern, tuple(sorted(op_set)))
        grouped.setdefault(key, []).append((resource, name))
    return [
        AclCommand(pattern, operations, tuple(resources))
        for (pattern, operations), resources in grouped.items()
    ]


def principal_of(user: str) -> str:
    return f"User:{user}"


def shell_commands(
    role: Role,
    namespace: str,
    principal: str,
    bootstrap: str,
    acls: Sequence[Acl] | None = None,
    *,
    remove: bool = False,
    target_topics: Sequence[str] = (),
    queues: Sequence[str] = (),
) -> list[str]:
    """What a Kafka admin runs with Kafka's own scripts to grant `role` to `principal`
    (`acls`, default the role's whole plan with `target_topics`; `remove`: to take
    them away instead)."""
    lines = []
    whole = plan(role, namespace, target_topics, queues)
    for command in commands(whole if acls is None else acls):
        args = command.arguments(principal)
        if remove:
            args = ["--remove", "--force", *args[1:]]
        text = " ".join(_quote(a) for a in args)
        lines.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties {text}"
        )
    return lines


def _quote(arg: str) -> str:
    return (
        arg if re.fullmatch(r"[A-Za-z0-9_.:=/@-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"
    )


def table_rows(
    namespace: str, target_topics: Sequence[str] = (), queues: Sequence[str] = ()
) -> list[tuple[str, str, str, str, str]]:
    """(role, resource type, pattern, name, operations) per resource, for the table."""
    rows: list[tuple[str, str, str, str, str]] = []
    for role in Role:
        by_resource: dict[tuple[ResourceType, PatternType, str], list[str]] = {}
        for acl in plan(role, namespace, target_topics, queues):
            by_resource.setdefault((acl.resource, acl.pattern, acl.name), []).append(
                acl.operation.value
            )
        for (resource, pattern, name), ops in by_resource.items():
            rows.append((role.value, resource.value, pattern.value, name, ", ".join(ops)))
    return rows


def markdown_table(namespace: str) -> str:
    lines = ["| role | resource | pattern | name | operations |", "|---|---|---|---|---|"]
    lines += [f"| {r} | {t} | {p} | `{n}` | {o} |" for r, t, p, n, o in table_rows(namespace)]
    return "\n".join(lines) + "\n"
