"""`kafkron acl plan --namespace NS`: every ACL of every role, and the commands that grant them."""

from __future__ import annotations

import argparse
from typing import Any

from actors.cli.output import fail, print_json, print_table
from actors.cli.target_topics_arg import add_target_topic, target_topics_of
from topics.acl_plan import Role, check_namespace, migration, plan, shell_commands, table_rows
from topics.names import Settings
from topics.queues import check_queue, with_lanes

_EPILOG = """\
examples:
  kafkron acl plan --namespace billing
  kafkron acl plan --namespace billing --role worker --commands
  kafkron acl plan --namespace billing --json
  kafkron acl plan --namespace billing --migrate
  kafkron acl plan --namespace billing --role scheduler --target-topic orders.due \\
      --target-topic 'billing-out.*'

--migrate prints the ACL changes of the upgrade from 0.1's transactional ids
({ns}-shard-N, {ns}-worker-N) to {ns}.shard.N and {ns}.worker.N for one principal
(--role and --principal are required: grants are per principal, so run it for every
scheduler and worker user): the grants to add before the first 0.2 process starts,
and those to remove once every process runs with KAFKRON_TRANSACTIONAL_IDS=tenant.

--target-topic NAME or PREFIX* (repeatable; the schedulers' own --target-topic values)
adds the scheduler's Write, Describe and DescribeConfigs on each topic Kafka targets
may write to: LITERAL for a name, PREFIXED for a prefix.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "acl",
        help="the least-privilege ACLs of each role",
        description="Print the ACLs each kafkron role needs in a namespace.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="acl_action", metavar="ACTION", required=True)
    show = actions.add_parser("plan", help="the table of ACLs and Kafka's commands for them")
    show.add_argument("--namespace", default=None, help="default $KAFKRON_NAMESPACE or kafkron")
    show.add_argument("--role", choices=[r.value for r in Role], default=None)
    show.add_argument(
        "--principal", default=None, help="principal in the commands (default User:<role>)"
    )
    show.add_argument("--commands", action="store_true", help="only the kafka-acls commands")
    show.add_argument("--json", action="store_true", help="the ACLs as JSON")
    show.add_argument(
        "--migrate",
        action="store_true",
        help="the ACL changes of the upgrade to the 0.2 transactional ids",
    )
    add_target_topic(show)
    show.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME",
        help="grant worker queue NAME's topic {ns}.runs.NAME: the schedulers write it, a"
        " worker given --queue reads only the queues named (add 'default' for {ns}.runs),"
        " the recorder and viewers read it (repeatable)",
    )
    show.add_argument(
        "--lanes",
        action="store_true",
        help="grant the high lanes ({ns}.runs.Q.hi) of the default queue (or of each"
        " --queue) as queues: workers started with --lanes read them",
    )
    show.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    settings = Settings.from_env(namespace=args.namespace)
    try:
        namespace = check_namespace(settings.namespace)
    except ValueError as exc:
        return fail("acl plan", str(exc), 2)
    roles = [Role(args.role)] if args.role else list(Role)
    try:
        targets = target_topics_of(args)
        queues = tuple(with_lanes([check_queue(q, "--queue") for q in args.queue], args.lanes))
        plan(Role.SCHEDULER, namespace, targets)
    except ValueError as exc:  # FieldError too
        return fail("acl plan", str(exc), 2)
    if args.migrate:
        if not args.role or not args.principal:
            return fail(
                "acl plan",
                "--migrate needs --role and --principal: grants are per principal, so print"
                " the migration once for every scheduler and worker user",
                2,
            )
        return _print_migration(roles, namespace, args.principal, settings.bootstrap)
    if args.json:
        print_json(
            {
                role.value: [
                    {
                        "resource": a.resource.value,
                        "pattern": a.pattern.value,
                        "name": a.name,
                        "operation": a.operation.value,
                    }
                    for a in plan(role, namespace, targets, queues)
                ]
                for role in roles
            }
        )
        return 0
    if not args.commands:
        rows = [
            row
            for row in table_rows(namespace, targets, queues)
            if row[0] in {r.value for r in roles}
        ]
        print_table(("role", "resource", "pattern", "name", "operations"), rows)
        print()
    for role in roles:
        principal = args.principal or f"User:{role.value}"
        print(f"# {role.value}")
        for line in shell_commands(
            role, namespace, principal, settings.bootstrap, target_topics=targets, queues=queues
        ):
            print(line)
    return 0


def _print_migration(roles: list[Role], namespace: str, principal: str, bootstrap: str) -> int:
    """Two steps, each a list of kafka-acls commands per role that holds transactional ids."""
    steps = (
        ("before the first 0.2 process starts: add", False),
        ("once every process runs with KAFKRON_TRANSACTIONAL_IDS=tenant: remove", True),
    )
    for title, remove in steps:
        print(f"# {title}")
        for role in roles:
            change = migration(role, namespace)
            acls = change.remove if remove else change.add
            if not acls:
                continue
            for line in shell_commands(role, namespace, principal, bootstrap, acls, remove=remove):
                print(line)
    return 0
