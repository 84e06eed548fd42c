"""`kafkron broker start --secure`: TLS, SASL/SCRAM and the ACL authorizer.

What a secure local broker is:

- **Certificates.** On the first secure start the JDK's ``keytool`` makes a CA
  (``ca.p12``, its certificate ``ca.pem``) and a broker key pair signed by it for
  ``127.0.0.1`` and ``localhost`` (``broker.p12``), under ``<data>/secure`` (mode 0700).
  Clients trust ``ca.pem``. No cryptography is written here: keytool does it all.
- **Listeners.** Clients and inter-broker traffic use ``SASL_SSL`` with
  ``SCRAM-SHA-512``. The KRaft controller listener cannot use SCRAM (controllers
  authenticate before the metadata log that holds SCRAM credentials is read), so it
  is ``SSL`` with client certificates required: only a holder of a key signed by this
  CA, i.e. a broker, gets in, as principal ``User:broker`` (its certificate's CN).
- **Users.** ``admin`` (the super user that creates topics, users and ACLs) and
  ``broker`` (inter-broker) get SCRAM credentials bootstrapped into the metadata log
  when the storage is formatted (``kafka-storage format --add-scram``).
- **Authorization.** ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``:
  anything not granted by an ACL is refused; ``super.users`` are ``admin`` and
  ``broker``.

Secrets: every password is random, lives in a 0600 file under ``<data>/secure`` and
reaches a JVM through a file, never an argument (``ps`` shows none): ``keytool`` reads
``-storepass:env``, and tools whose arguments hold a password are started with a
0600 ``@argfile`` (the java launcher reads main class and arguments from it) that is
deleted as soon as the JVM has read it. ``admin.properties`` is the admin's client
config with Kafka's property names, usable by Kafka's tools (``--command-config``) and
by kafkron (``--client-config`` / ``KAFKRON_CLIENT_CONFIG``).

A data dir is secure or not for its whole life: its storage was formatted with or
without the SCRAM users, so `start` keeps a secure dir secure even without
``--secure``, and refuses ``--secure`` on a dir formatted without it.

A cluster (``--nodes 3 --secure``) keeps one ``secure/`` in the cluster's data dir for
all its nodes: one CA, one broker key pair (every node listens on 127.0.0.1, which its
certificate names, and every node is principal ``broker``), one admin. Each node's
storage is formatted with the same ``--add-scram`` users, its inter-broker traffic is
SASL_SSL as ``broker`` and its controller listener (the Raft quorum between nodes
too) mutual TLS.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from actors.broker.errors import BrokerError
from actors.broker.layout import HOST, BrokerLayout

MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
BROKER_USER = "broker"
CLIENT_LISTENER = "SASL_SSL"
CONTROLLER_LISTENER = "CONTROLLER"
CA_VALIDITY_DAYS = 3650
CERT_VALIDITY_DAYS = 825
# keytool runs for a fraction of a second: the client compiler and serial GC halve
# its start on a busy machine.
_KEYTOOL_JVM = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-Xmx128m")
_STOREPASS_ENV = "KAFKRON_KEYSTORE_PASSWORD"


def secure_dir(layout: BrokerLayout) -> Path:
    """Certificates and secrets: the node's own, or its cluster's shared one."""
    return layout.secure_home or layout.data_dir / "secure"


def ca_file(layout: BrokerLayout) -> Path:
    """The CA certificate (PEM) clients trust: ``KAFKRON_SSL_CAFILE``."""
    return secure_dir(layout) / "ca.pem"


def admin_config(layout: BrokerLayout) -> Path:
    """The admin's client config (Kafka property names, 0600)."""
    return secure_dir(layout) / "admin.properties"


def _keystore(layout: BrokerLayout) -> Path:
    return secure_dir(layout) / "broker.p12"


def _secret_file(layout: BrokerLayout, name: str) -> Path:
    return secure_dir(layout) / f"{name}.password"


def is_secure(layout: BrokerLayout) -> bool:
    """True once this data dir has been set up by a secure start."""
    return admin_config(layout).exists()


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by its owner only, from the first byte on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


def _secret(layout: BrokerLayout, name: str) -> str:
    """The password `name` of this data dir, made (random, 0600) on first use."""
    path = _secret_file(layout, name)
    if not path.exists():
        _write_private(path, secrets.token_urlsafe(24) + "\n")
    return path.read_text().strip()


def _keytool(java: str) -> str:
    sibling = Path(java).with_name("keytool")
    return str(sibling) if sibling.exists() else "keytool"


def _run_keytool(layout: BrokerLayout, java: str, args: Sequence[str]) -> None:
    env = {**os.environ, _STOREPASS_ENV: _secret(layout, "keystore")}
    done = subprocess.run(
        [_keytool(java), *_KEYTOOL_JVM, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=secure_dir(layout),
    )
    if done.returncode != 0:
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise BrokerError(
            f"keytool {args[0]} failed in {secure_dir(layout)}: {last[0].strip()}"
            f" (remove {layout.data_dir} to start from scratch)"
        )


def ensure_certificates(layout: BrokerLayout, java: str) -> None:
    """Make the CA and the broker's signed key pair once; later starts reuse them."""
    directory = secure_dir(layout)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(stat.S_IRWXU)
    if _keystore(layout).exists() and ca_file(layout).exists():
        return
    store = ("-storetype", "PKCS12", "-storepass:env", _STOREPASS_ENV)
    san = f"SAN=ip:{HOST},dns:localhost"
    for leftover in ("ca.p12", "broker.p12", "broker.csr", "broker.crt", "ca.pem"):
        (directory / leftover).unlink(missing_ok=True)
    steps: list[list[str]] = [
        # The CA: a self-signed key pair allowed to sign (basic constraints CA:true).
        ["-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1",
         "-dname", "CN=kafkron-local-ca", "-ext", "bc:c", "-validity", str(CA_VALIDITY_DAYS),
         "-keystore", "ca.p12", *store],
        ["-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", *store,
         "-file", "ca.pem"],
        # The broker: CN=broker is its principal on the mutual-TLS controller listener.
        ["-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1",
         "-dname", f"CN={BROKER_USER}", "-validity", str(CERT_VALIDITY_DAYS),
         "-keystore", "broker.p12", *store],
        ["-certreq", "-alias", "broker", "-keystore", "broker.p12", *store,
         "-file", "broker.csr"],
        ["-gencert", "-alias", "ca", "-keystore", "ca.p12", *store, "-infile", "broker.csr",
         "-outfile", "broker.crt", "-rfc", "-validity", str(CERT_VALIDITY_DAYS), "-ext", san],
        ["-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
         "-keystore", "broker.p12", *store],
        ["-importcert", "-noprompt", "-alias", "broker", "-file", "broker.crt",
         "-keystore", "broker.p12", *store],
    ]  # fmt: skip
    for step in steps:
        _run_keytool(layout, java, step)
    for scratch in ("broker.csr", "broker.crt"):
        (directory / scratch).unlink(missing_ok=True)


def _jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{user}" password="{password}";'
    )


def server_properties(layout: BrokerLayout) -> str:
    """Lines appended to ``server.properties``; a later key wins in Java properties."""
    keystore_password = _secret(layout, "keystore")
    settings: dict[str, str] = {
        "listeners": f"{CLIENT_LISTENER}://{HOST}:{layout.port},"
        f"{CONTROLLER_LISTENER}://{HOST}:{layout.controller_port}",
        "advertised.listeners": f"{CLIENT_LISTENER}://{HOST}:{layout.port}",
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:SSL,{CLIENT_LISTENER}:SASL_SSL",
        "inter.broker.listener.name": CLIENT_LISTENER,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{CLIENT_LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": _jaas(
            BROKER_USER, _secret(layout, BROKER_USER)
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(_keystore(layout)),
        "ssl.keystore.password": keystore_password,
        "ssl.key.password": keystore_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file(layout)),
        # Only a key signed by this CA (a broker) may talk to the controller.
        f"listener.name.{CONTROLLER_LISTENER.lower()}.ssl.client.auth": "required",
        # "CN=broker" -> principal "broker", the same name as its SCRAM user.
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
    }
    lines = ["", "# --secure: TLS, SASL/SCRAM and ACLs (these keys override the ones above)"]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def scram_format_arguments(layout: BrokerLayout) -> list[str]:
    """``--add-scram`` arguments of ``kafka-storage format`` for admin and broker."""
    args: list[str] = []
    for user in (ADMIN_USER, BROKER_USER):
        args += ["--add-scram", f"{MECHANISM}=[name={user},password={_secret(layout, user)}]"]
    return args


def client_properties(layout: BrokerLayout, user: str, password: str) -> str:
    """A client config with Kafka's names for `user` on this broker."""
    return "\n".join(
        [
            f"security.protocol={CLIENT_LISTENER}",
            f"sasl.mechanism={MECHANISM}",
            f"sasl.jaas.config={_jaas(user, password)}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={ca_file(layout)}",
            "",
        ]
    )


def prepare(layout: BrokerLayout, java: str) -> str:
    """Certificates, secrets and the admin's client config; the server.properties lines."""
    ensure_certificates(layout, java)
    _write_private(
        admin_config(layout), client_properties(layout, ADMIN_USER, _secret(layout, ADMIN_USER))
    )
    return server_properties(layout)


def refuse_unsecured_storage(layout: BrokerLayout) -> None:
    """`BrokerError` if this data dir's storage was formatted without the SCRAM users."""
    if (layout.log_dirs / "meta.properties").exists() and not _keystore(layout).exists():
        raise BrokerError(
            f"{layout.data_dir} was formatted without --secure, so it has no SCRAM users:"
            " use another --data-dir (or --port) for a secure broker, or remove that dir"
        )


def probe_kwargs(layout: BrokerLayout) -> dict[str, Any]:
    """aiokafka keyword arguments with which the admin probes this broker ({} if plain)."""
    if not is_secure(layout):
        return {}
    from aiokafka.helpers import create_ssl_context

    return {
        "security_protocol": CLIENT_LISTENER,
        "ssl_context": create_ssl_context(cafile=str(ca_file(layout))),
        "sasl_mechanism": MECHANISM,
        "sasl_plain_username": ADMIN_USER,
        "sasl_plain_password": _secret(layout, ADMIN_USER),
    }


def _argfile_token(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextlib.contextmanager
def java_argfile(layout: BrokerLayout, main_and_args: Sequence[str]) -> Iterator[str]:
    """A 0600 file for ``java @file`` holding a main class and secret arguments.

    Yields the ``@path`` argument; the file is deleted when the block ends.
    """
    directory = secure_dir(layout)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"args-{secrets.token_hex(6)}"
    _write_private(path, "\n".join(_argfile_token(a) for a in main_and_args) + "\n")
    try:
        yield f"@{path}"
    finally:
        path.unlink(missing_ok=True)
