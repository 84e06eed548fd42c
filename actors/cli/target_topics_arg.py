"""``--target-topic NAME|PREFIX*`` of `kafkron acl plan` and `kafkron users add`.

The scheduler's own flag of the same name says which topics Kafka targets may write
to; these two print or grant the ACLs that let it (`topics.acl_plan.target_acls`).
Only the scheduler role writes targets, so the flag is refused with any other role
rather than ignored: a grant that silently did nothing would be found at 3 a.m.
"""

from __future__ import annotations

import argparse

from topics.acl_plan import Role


def add_target_topic(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-topic",
        action="append",
        default=[],
        metavar="NAME|PREFIX*",
        help="a topic the schedulers' Kafka targets may write to, as given to"
        " `kafkron scheduler --target-topic` (repeatable; scheduler role only)",
    )


def target_topics_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--target-topic`` patterns; ValueError if the role given is not scheduler."""
    patterns = tuple(dict.fromkeys(args.target_topic))
    if patterns and args.role not in (None, Role.SCHEDULER.value):
        raise ValueError(
            f"--target-topic grants the scheduler role (the shard writes a Kafka target's"
            f" record), not {args.role}"
        )
    return patterns
