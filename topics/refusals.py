"""What a refused client is told: who it is, what it tried, and which role allows it.

Kafka answers a missing ACL with an error code and the resource name; aiokafka answers
a wrong password by logging the reason and raising "unable to bootstrap". Neither
tells a person what to do, so:

- `denial_message` turns (operation, resource) into "User:alice may not Write topic
  b.runs; the role that grants it: scheduler (kafkron users add ... --role
  scheduler --namespace b)", using the ACL plan (`topics.acl_plan.granting_roles`).
- `from_error` does the same from aiokafka's authorization errors.
- `authentication_problem` opens one connection with the process's security
  settings and says "authentication failed for user X" (or what TLS or the protocol
  refused) instead of the generic bootstrap failure. The password is never quoted.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)

from topics.acl_plan import (
    NAMESPACE_PATTERN,
    Operation,
    ResourceType,
    Role,
    granting_roles,
    plan,
)
from topics.security import ClientSecurity, SecurityConfigError, current, security_kwargs

AUTHORIZATION_ERRORS: tuple[type[KafkaError], ...] = (
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)


class AuthenticationFailed(Exception):
    """The broker refused this process's credentials or protocol; the text says which."""


class NotAuthorized(Exception):
    """An ACL is missing; the text names the operation, the resource and the granting role."""


_PEOPLE_ROLES = frozenset({Role.SUBMITTER, Role.VIEWER})


def _principal() -> str:
    try:
        return current().principal()
    except SecurityConfigError:
        return "this client"


def denial_message(
    namespace: str,
    resource: ResourceType,
    name: str,
    operation: Operation | None,
    principal: str | None = None,
) -> str:
    """One line: who may not do what, and which role of `namespace` would allow it.

    `operation` None (the client cannot tell which one was refused) lists every
    operation of the plan on that resource with its roles.
    """
    who = principal or _principal()
    what = f"{resource.value} {name}"
    if not NAMESPACE_PATTERN.fullmatch(namespace):
        return f"{who} is not authorized on {what}"
    ops = [operation] if operation is not None else list(Operation)
    grants = []
    for op in ops:
        roles = granting_roles(namespace, resource, name, op)
        if roles:
            grants.append(f"{op.value} is granted to role {' or '.join(r.value for r in roles)}")
    verb = operation.value if operation is not None else "use"
    text = f"{who} may not {verb} {what}"
    if not grants:
        return f"{text}: no kafkron role of namespace {namespace} is granted that"
    # The hint names the narrowest role that would do, least privilege first, and a
    # role for people (submitter, viewer) before a service's: the recorder's grants are
    # fewer than the viewer's, but they come with its consumer group, which a person
    # running `kafkron ls` must not share with the recorder.
    role = sorted(
        granting_roles(namespace, resource, name, ops[0]) if operation else [],
        key=lambda r: (r not in _PEOPLE_ROLES, len(plan(r, namespace))),
    )
    hint = (
        f" (an admin grants it with `kafkron users add NAME --role {role[0].value}"
        f" --namespace {namespace}`)"
        if role
        else ""
    )
    return f"{text}: {'; '.join(grants)}{hint}"


def from_error(
    exc: BaseException, namespace: str, operation: Operation | None = None
) -> NotAuthorized | None:
    """A `NotAuthorized` for aiokafka's authorization errors, None for anything else."""
    if not isinstance(exc, AUTHORIZATION_ERRORS):
        return None
    arg = exc.args[0] if exc.args else "?"
    # A refused AddPartitionsToTxn names the set of refused topics; one is enough.
    name = str(min(arg)) if isinstance(arg, set | frozenset | list | tuple) and arg else str(arg)
    if isinstance(exc, TopicAuthorizationFailedError):
        resource = ResourceType.TOPIC
    elif isinstance(exc, GroupAuthorizationFailedError):
        resource = ResourceType.GROUP
    else:
        resource = ResourceType.TRANSACTIONAL_ID
        operation = operation or Operation.WRITE
    return NotAuthorized(denial_message(namespace, resource, name, operation))


def denied_in(exc: BaseException, namespace: str) -> str | None:
    """The denial message of the authorization error anywhere in `exc`'s chain, or None.

    For the actors' transactions: what they are refused on a topic is Write (a
    produce, or adding the partition to the transaction), on a group Read (the
    consumed offsets), on a transactional id Write. ``.error`` is followed too:
    the scheduler's writer wraps a refused batch's error that way.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        operation = Operation.READ if isinstance(current, GroupAuthorizationFailedError) else None
        found = from_error(current, namespace, operation or Operation.WRITE)
        if found is not None:
            return str(found)
        inner = getattr(current, "error", None)
        todo += [current.__cause__, current.__context__]
        if isinstance(inner, BaseException):
            todo.append(inner)
    return None


async def topic_denied(client: Any, topic: str) -> bool:
    """True if the broker refuses `topic`'s metadata to this client (a missing ACL).

    A metadata request for all topics silently leaves unauthorized ones out, so an
    empty answer cannot tell "does not exist" from "not yours"; asking for the one
    topic can. `client` is an aiokafka ``AIOKafkaClient`` (a consumer's ``_client``).
    """
    from aiokafka.cluster import ClusterMetadata

    metadata = ClusterMetadata()
    with contextlib.suppress(KafkaError):
        await client._metadata_update(metadata, [topic])
    return topic in metadata.unauthorized_topics


def _first_server(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host.strip("[]") or first, int(port) if port.isdigit() else 9092


def _describe(security: ClientSecurity) -> str:
    if security.uses_sasl:
        return f"{security.protocol}/{security.mechanism}"
    return security.protocol


async def authentication_problem(bootstrap: str, timeout_s: float = 15.0) -> str | None:
    """Why this process's credentials are refused by `bootstrap`, or None if they are not.

    None also when nothing listens (the command's own "cannot reach" says that better).
    """
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    security = current()
    kwargs = security_kwargs()
    host, port = _first_server(bootstrap)
    where = f"{host}:{port} ({_describe(security)})"
    try:
        async with asyncio.timeout(timeout_s):
            conn = await create_conn(host, port, request_timeout_ms=int(timeout_s * 1000), **kwargs)
            try:
                # A plaintext client is only found out when it sends: the broker drops it.
                await conn.send(MetadataRequest([]))
            finally:
                with contextlib.suppress(Exception):
                    conn.close()
    except SaslAuthenticationFailed:
        return f"authentication failed for user {security.username} at {where}"
    except ssl.SSLCertVerificationError as exc:
        return (
            f"TLS: the broker's certificate at {where} is not trusted ({exc.verify_message});"
            " point KAFKRON_SSL_CAFILE at the CA that signed it"
        )
    except ssl.SSLError as exc:
        return f"TLS handshake with {where} failed ({exc.reason})"
    except (ConnectionRefusedError, TimeoutError, OSError):
        return None
    except KafkaConnectionError:
        if security.uses_sasl:
            return (
                f"the broker at {where} closed the connection while user"
                f" {security.username} authenticated; check the protocol and mechanism"
            )
        return (
            f"the broker at {where} closed the connection: it requires authentication."
            " Set KAFKRON_SECURITY_PROTOCOL (e.g. SASL_SSL), KAFKRON_SASL_MECHANISM,"
            " KAFKRON_SASL_USERNAME, KAFKRON_SASL_PASSWORD_FILE and KAFKRON_SSL_CAFILE,"
            " or pass --client-config FILE"
        )
    except KafkaError as exc:
        return f"the broker at {where} refused this client ({type(exc).__name__})"
    return None
