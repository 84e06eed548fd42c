"""`kafkron topics create|check`: the six topics of the contract (see `topics.admin`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from topics.admin import (
    DEFAULT_PARTITIONS,
    TopicsError,
    audit_topics,
    create_topics,
    guard_topics,
)
from topics.command_fields import FieldError
from topics.names import Settings, TopicKind
from topics.queue_topics import check_with_queues, create_queue_topics
from topics.queues import DEFAULT_QUEUE, check_queue, with_lanes

log = logging.getLogger("kafkron.topics")

_EPILOG = """\
examples:
  kafkron topics create                   # 6 shards in namespace $KAFKRON_NAMESPACE (kafkron)
  kafkron topics create --partitions 12 --runs-partitions 24
  kafkron topics create --replication-factor 3
  KAFKRON_NAMESPACE=staging kafkron topics check
  kafkron topics create --queue gpu       # worker queue gpu: {ns}.runs.gpu
  kafkron topics create --lanes           # the default queue's high lane {ns}.runs.default.hi
  kafkron topics create --lanes --queue gpu   # {ns}.runs.gpu and its high lane {ns}.runs.gpu.hi

The shard count (partitions of commands, schedules and results) is fixed at creation.
The replication factor defaults to min(3, brokers in the cluster); from 3 replicas up
every topic gets min.insync.replicas=2 and unclean.leader.election.enable=false.
`check` also verifies those, LogAppendTime on {ns}.runs and max.message.bytes.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="create or check the namespace's Kafka topics",
        description="Create or check the six topics of kafkron's contract.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="topics_action", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create",
        help="create missing topics (idempotent)",
        epilog="example: kafkron topics create --partitions 6",
    )
    create.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="shard count: partitions of commands, schedules and results"
        f" (default {DEFAULT_PARTITIONS})",
    )
    create.add_argument(
        "--runs-partitions",
        type=int,
        default=None,
        help="partitions of the runs topic, i.e. worker parallelism (default: --partitions)",
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        metavar="N",
        help="replicas of every partition (default: min(3, brokers in the cluster))",
    )
    create.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME",
        help="also create worker queue NAME's runs topic, {ns}.runs.NAME (repeatable)",
    )
    create.add_argument(
        "--lanes",
        action="store_true",
        help="also create the high lane (runs of priority 5-9) of each --queue NAME,"
        " {ns}.runs.NAME.hi, or without --queue of the default queue, {ns}.runs.default.hi",
    )
    create.set_defaults(func=run_create)
    check = actions.add_parser(
        "check",
        help="name every difference from the contract; exit 1 if any",
        epilog="example: kafkron topics check --partitions 6",
    )
    check.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="expected shard count (default: whatever the sharded topics agree on)",
    )
    check.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME",
        help="worker queue NAME's topic must exist too (every existing {ns}.runs.* is"
        " checked anyway; repeatable)",
    )
    check.add_argument(
        "--lanes",
        action="store_true",
        help="the high lane of each --queue (of the default queue without --queue) must exist too",
    )
    check.set_defaults(func=run_check)


def run_create(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    # An explicit --partitions is also checked against topics that already existed.
    partitions = DEFAULT_PARTITIONS if args.partitions is None else args.partitions
    if partitions < 1 or (args.runs_partitions is not None and args.runs_partitions < 1):
        print("kafkron topics create: partition counts must be at least 1", file=sys.stderr)
        return 2
    if args.replication_factor is not None and args.replication_factor < 1:
        print("kafkron topics create: --replication-factor must be at least 1", file=sys.stderr)
        return 2
    try:
        queues = with_lanes([check_queue(q, "--queue") for q in args.queue], args.lanes)
    except FieldError as exc:
        print(f"kafkron topics create: {exc}", file=sys.stderr)
        return 2
    try:
        created = asyncio.run(
            create_topics(settings, partitions, args.runs_partitions, args.replication_factor)
        )
        created += asyncio.run(
            create_queue_topics(
                settings,
                queues,
                args.runs_partitions or partitions,
                args.replication_factor,
            )
        )
        audit = asyncio.run(audit_topics(settings, args.partitions))
        for queue in (q for q in queues if q != DEFAULT_QUEUE):  # {ns}.runs: audited above
            queue_audit = asyncio.run(
                audit_topics(settings.for_placement(queue), args.partitions, (TopicKind.RUNS,))
            )
            audit.broken.extend(queue_audit.broken)
            audit.weakened.extend(queue_audit.weakened)
    except (TopicsError, ValueError) as exc:
        print(f"kafkron topics create: {exc}", file=sys.stderr)
        return 1
    for name in created:
        print(f"created {name}")
    if not created:
        print(f"all topics of namespace {settings.namespace!r} already exist")
    for problem in audit.broken:
        print(f"mismatch: {problem}", file=sys.stderr)
    # A replication factor asked for explicitly is the user's choice: warn, do not fail.
    explicit = args.replication_factor is not None
    for problem in audit.weakened:
        print(f"{'warning' if explicit else 'mismatch'}: {problem}", file=sys.stderr)
    for advice in audit.advice:  # guarantees hold: said, never a failure
        print(f"note: {advice}", file=sys.stderr)
    return 1 if audit.broken or (audit.weakened and not explicit) else 0


def run_check(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    try:
        queues = with_lanes([check_queue(q, "--queue") for q in args.queue], args.lanes)
    except FieldError as exc:
        print(f"kafkron topics check: {exc}", file=sys.stderr)
        return 2
    try:
        problems = asyncio.run(check_with_queues(settings, args.partitions, queues))
    except TopicsError as exc:
        print(f"kafkron topics check: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"topics of namespace {settings.namespace!r} on {settings.bootstrap} match the contract")
    return 0


def guard(actor: str, settings: Settings, kinds: tuple[TopicKind, ...] = tuple(TopicKind)) -> bool:
    """Before `actor` (scheduler, worker) starts: False, with the differences printed,
    if its topics break a guarantee; True otherwise, each weakening logged as a warning.
    """
    try:
        weakened = asyncio.run(guard_topics(settings, kinds))
    except TopicsError as exc:
        print(f"kafkron {actor}: {exc}", file=sys.stderr)
        return False
    for problem in weakened:
        log.warning("starting anyway; this weakens a guarantee: %s", problem)
    return True
