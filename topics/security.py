"""Client security of every Kafka client kafkron creates, from one place.

Every ``AIOKafkaProducer``, ``AIOKafkaConsumer`` and ``AIOKafkaAdminClient`` of
kafkron is built with ``**security_kwargs()``. The settings come from the
environment, or from a client config file with Kafka's own property names (the file
a Kafka tool takes as ``--command-config``), so one file serves kafkron and Kafka's
tools alike:

================================  ==========================================
environment                       Kafka property (``--client-config FILE``)
================================  ==========================================
``KAFKRON_SECURITY_PROTOCOL``     ``security.protocol``
``KAFKRON_SASL_MECHANISM``        ``sasl.mechanism``
``KAFKRON_SASL_USERNAME``         ``username="..."`` of ``sasl.jaas.config``
``KAFKRON_SASL_PASSWORD_FILE``    ``password="..."`` of ``sasl.jaas.config``
``KAFKRON_SSL_CAFILE``            ``ssl.truststore.location`` (type ``PEM``)
``KAFKRON_CLIENT_CONFIG``         the file itself (``--client-config`` sets it)
================================  ==========================================

An environment variable wins over the file. The password is only ever read from a
file (never an argument, so ``ps`` never shows it), kept out of ``repr`` and never
put in an error message. With nothing set the protocol is ``PLAINTEXT`` and the
keyword arguments are empty, so a client is built exactly as before.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.helpers import create_ssl_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ENV_KEYS = (
    "KAFKRON_SECURITY_PROTOCOL",
    "KAFKRON_SASL_MECHANISM",
    "KAFKRON_SASL_USERNAME",
    "KAFKRON_SASL_PASSWORD_FILE",
    "KAFKRON_SSL_CAFILE",
    "KAFKRON_CLIENT_CONFIG",
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SecurityConfigError(Exception):
    """The client security settings are incomplete or contradictory; the text says which."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client authenticates and what it trusts. The password never shows in repr."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def principal(self) -> str:
        """``User:NAME`` as the broker's authorizer sees this client (ANONYMOUS without SASL)."""
        return f"User:{self.username}" if self.uses_sasl and self.username else "User:ANONYMOUS"


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` as Kafka's tools read them: ``key=value`` or ``key: value``.

    Comments (``#``, ``!``) and blank lines are skipped; a trailing backslash continues
    a line, which is how ``sasl.jaas.config`` is often split.
    """
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line)
        if match:
            props[match.group(1)] = match.group(2).strip()
    if pending:
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", pending)
        if match:
            props[match.group(1)] = match.group(2).strip()
    return props


def _jaas_options(jaas: str) -> dict[str, str]:
    # Kafka reads JAAS values with java.io.StreamTokenizer: a backslash escapes the next char.
    return {key: re.sub(r"\\(.)", r"\1", value) for key, value in _JAAS_OPTION.findall(jaas)}


def from_properties(props: Mapping[str, str], source: str) -> dict[str, str]:
    """The fields a client config file sets, as ``ClientSecurity`` keyword arguments."""
    fields: dict[str, str] = {}
    if "security.protocol" in props:
        fields["protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        fields["mechanism"] = props["sasl.mechanism"].upper()
    jaas = props.get("sasl.jaas.config")
    if jaas:
        options = _jaas_options(jaas)
        if "username" in options:
            fields["username"] = options["username"]
        if "password" in options:
            fields["password"] = options["password"]
    location = props.get("ssl.truststore.location")
    if location:
        kind = props.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise SecurityConfigError(
                f"{source}: ssl.truststore.type is {kind}; kafkron's client reads PEM"
                " certificates only: set ssl.truststore.type=PEM and point"
                " ssl.truststore.location at the CA's .pem file"
            )
        fields["cafile"] = location
    return fields


def _read_password(path: str) -> str:
    try:
        text = Path(path).expanduser().read_text()
    except OSError as exc:
        raise SecurityConfigError(
            f"KAFKRON_SASL_PASSWORD_FILE {path}: cannot read it ({exc.strerror})"
        ) from None
    password = text.rstrip("\r\n")
    if not password:
        raise SecurityConfigError(f"KAFKRON_SASL_PASSWORD_FILE {path} is empty")
    return password


def load(environ: Mapping[str, str] | None = None) -> ClientSecurity:
    """The client security settings: the client config file, then the environment over it."""
    env = os.environ if environ is None else environ
    fields: dict[str, str] = {}
    config_path = env.get("KAFKRON_CLIENT_CONFIG")
    if config_path:
        try:
            text = Path(config_path).expanduser().read_text()
        except OSError as exc:
            raise SecurityConfigError(
                f"client config {config_path}: cannot read it ({exc.strerror})"
            ) from None
        fields.update(from_properties(parse_properties(text), config_path))
    for key, name in (
        ("KAFKRON_SECURITY_PROTOCOL", "protocol"),
        ("KAFKRON_SASL_MECHANISM", "mechanism"),
        ("KAFKRON_SASL_USERNAME", "username"),
        ("KAFKRON_SSL_CAFILE", "cafile"),
    ):
        value = env.get(key)
        if value:
            fields[name] = value.upper() if name in ("protocol", "mechanism") else value
    password_file = env.get("KAFKRON_SASL_PASSWORD_FILE")
    if password_file:
        fields["password"] = _read_password(password_file)
    security = ClientSecurity(**fields)
    _validate(security)
    return security


def _validate(security: ClientSecurity) -> None:
    if security.protocol not in PROTOCOLS:
        raise SecurityConfigError(
            f"security protocol {security.protocol!r} is not one of {', '.join(PROTOCOLS)}"
        )
    if not security.uses_sasl:
        return
    if security.mechanism not in MECHANISMS:
        raise SecurityConfigError(
            f"SASL mechanism {security.mechanism!r} is not one of {', '.join(MECHANISMS)}"
        )
    if not security.username:
        raise SecurityConfigError(
            f"{security.protocol} needs a user: set KAFKRON_SASL_USERNAME"
            " (or username in the client config's sasl.jaas.config)"
        )
    if security.password is None:
        raise SecurityConfigError(
            f"{security.protocol} needs the password of user {security.username}: set"
            " KAFKRON_SASL_PASSWORD_FILE to a file holding it (never the password itself)"
        )


def _ssl_context(cafile: str | None) -> ssl.SSLContext:
    if cafile is not None and not Path(cafile).expanduser().is_file():
        raise SecurityConfigError(f"CA file {cafile} does not exist (KAFKRON_SSL_CAFILE)")
    try:
        context: ssl.SSLContext = create_ssl_context(
            cafile=str(Path(cafile).expanduser()) if cafile else None
        )
        return context
    except (ssl.SSLError, ValueError) as exc:
        raise SecurityConfigError(f"CA file {cafile} is not a PEM certificate ({exc})") from None


def client_kwargs(security: ClientSecurity) -> dict[str, Any]:
    """aiokafka keyword arguments for `security`; empty for plain PLAINTEXT."""
    kwargs: dict[str, Any] = {}
    if security.protocol == "PLAINTEXT":
        return kwargs
    kwargs["security_protocol"] = security.protocol
    if security.uses_tls:
        kwargs["ssl_context"] = _ssl_context(security.cafile)
    if security.uses_sasl:
        kwargs["sasl_mechanism"] = security.mechanism
        kwargs["sasl_plain_username"] = security.username
        kwargs["sasl_plain_password"] = security.password
    return kwargs


_cache: dict[tuple[str | None, ...], dict[str, Any]] = {}


def security_kwargs() -> dict[str, Any]:
    """aiokafka keyword arguments of this process's client security (see the module doc).

    Parsed once per distinct environment; every client constructor of kafkron spreads it.
    Raises `SecurityConfigError` when the settings are incomplete.
    """
    key = tuple(os.environ.get(name) for name in ENV_KEYS)
    cached = _cache.get(key)
    if cached is None:
        cached = _cache[key] = client_kwargs(load())
    return dict(cached)


def current() -> ClientSecurity:
    """This process's client security settings (for messages: user and protocol)."""
    return load()
