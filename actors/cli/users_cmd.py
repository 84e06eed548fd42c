"""`kafkron users add NAME --role ROLE`: a SCRAM user with its role's ACLs (`topics.acl_plan`).

Runs as the admin given by the client security settings (``--client-config`` or
``KAFKRON_*``, see `topics.security`) with Kafka's own tools (`actors.broker.tools`).
The new user's password is read from ``--password-file``, or made at random and
written there (0600) when the file does not exist yet; it never appears in an
argument, a log or a message.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from actors.broker.errors import BrokerError
from actors.broker.tools import KafkaTools, acl_run, scram_user_run
from actors.cli.output import fail
from actors.cli.target_topics_arg import add_target_topic, target_topics_of
from topics.acl_plan import Role, check_namespace, commands, plan, principal_of
from topics.names import Settings
from topics.security import SecurityConfigError, current

_EPILOG = """\
examples:
  kafkron --client-config admin.properties users add billing-scheduler \\
      --role scheduler --namespace billing --password-file billing-scheduler.password
  kafkron users add alice --role submitter --namespace billing --password-file alice.pw

The user then connects with KAFKRON_SECURITY_PROTOCOL=SASL_SSL,
KAFKRON_SASL_MECHANISM=SCRAM-SHA-512, KAFKRON_SASL_USERNAME=NAME,
KAFKRON_SASL_PASSWORD_FILE=FILE and KAFKRON_SSL_CAFILE=<the CA's .pem>.
`kafkron acl plan --namespace NS` shows what each role is granted.
"""
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# ConfigCommand's "[password=...]" syntax ends a value at ',' or ']'.
_PASSWORD = re.compile(r"^[^\s,\[\]=\"\\]{8,200}$")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "users",
        help="create SCRAM users with a role's least-privilege ACLs",
        description="Create a SCRAM-SHA-512 user and grant it one role's ACLs in a namespace.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="users_action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="create (or re-key) a user and grant its role")
    add.add_argument("name", help="the user name (its principal is User:NAME)")
    add.add_argument("--role", required=True, choices=[r.value for r in Role])
    add.add_argument(
        "--namespace", default=None, help="the tenant (default $KAFKRON_NAMESPACE or kafkron)"
    )
    add.add_argument(
        "--password-file",
        required=True,
        help="the user's password; made at random (0600) if the file does not exist",
    )
    add_target_topic(add)
    add.set_defaults(func=run_add)


def _password(path: Path) -> tuple[str, bool]:
    """The password in `path`, or a new random one written there; (password, created)."""
    if path.exists():
        password = path.read_text().rstrip("\r\n")
        if not _PASSWORD.fullmatch(password):
            raise ValueError(
                f"the password in {path} must be 8-200 characters without spaces, quotes,"
                " backslashes or any of , [ ] ="
            )
        return password, False
    password = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(password + "\n")
    return password, True


def run_add(args: argparse.Namespace) -> int:
    settings = Settings.from_env(namespace=args.namespace)
    if not _USER.fullmatch(args.name):
        return fail("users add", f"user name {args.name!r}: letters, digits, '.', '_', '-'", 2)
    try:
        check_namespace(settings.namespace)
        targets = target_topics_of(args)
        plan(Role(args.role), settings.namespace, targets)  # a bad pattern fails before I/O
        admin = current()
        path = Path(args.password_file).expanduser()
        password, created = _password(path)
    except (ValueError, SecurityConfigError, OSError) as exc:
        return fail("users add", str(exc), 2)
    role = Role(args.role)
    principal = principal_of(args.name)
    runs = [scram_user_run(args.name, password)]
    runs += [
        acl_run(
            command.arguments(principal), f"ACLs on {', '.join(n for _, n in command.resources)}"
        )
        for command in commands(plan(role, settings.namespace, targets))
    ]
    try:
        KafkaTools(settings.bootstrap, admin).run(runs)
    except BrokerError as exc:
        return fail("users add", f"as {admin.principal()}: {exc}")
    made = "new password written to" if created else "password from"
    print(
        f"user {args.name} ({principal}) is a {role.value} of namespace {settings.namespace};"
        f" {made} {path}"
    )
    return 0
