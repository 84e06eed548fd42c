"""Client security from one place: the environment and Kafka-style client config files."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from actors.broker.layout import BrokerLayout
from actors.broker.secure import server_properties
from actors.broker.tools import command_config
from topics.security import (
    ClientSecurity,
    SecurityConfigError,
    client_kwargs,
    load,
    parse_properties,
)

# A real CA certificate made by `kafkron broker start --secure` (public; its key is gone).
CA_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBXzCCAQSgAwIBAgIIZWl+I9SdIeQwCgYIKoZIzj0EAwIwGzEZMBcGA1UEAxMQ
a2Fma3Jvbi1sb2NhbC1jYTAeFw0yNjExMzAyMzIxMDZaFw0zNjExMjcyMzIxMDZa
MBsxGTAXBgNVBAMTEGthZmtyb24tbG9jYWwtY2EwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAATm7xQJ223r1Wu4Z2ZBDr3kIuS8VsLOX4gnURBZam52u6dkKXl6g6Jq
XeagotHAUHSya09y/ON2Mcfwh8WTU+axozIwMDAdBgNVHQ4EFgQUsj0exF/pC4Jj
qMzTiVoYJ2zQyCgwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEA
guuJQJrXBrnVPxwaCRj5qnHKmKKWyWTSF+qd7S0T3uECIQDMjSedPkr3eGQLi+kI
CeAcc9cUmou7CKR3D26kZsl1YA==
-----END CERTIFICATE-----
"""


def test_nothing_set_means_plaintext_and_no_keyword_arguments() -> None:
    assert load({}) == ClientSecurity()
    assert client_kwargs(load({})) == {}


def test_properties_parsing_handles_comments_separators_and_continuations() -> None:
    text = (
        "# a comment\n! another\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n    password="s3cret";\n'
    )
    props = parse_properties(text)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert 'username="alice"' in props["sasl.jaas.config"]
    assert props["sasl.jaas.config"].endswith('password="s3cret";')


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_client_config_file_with_kafka_names(tmp_path: Path) -> None:
    ca = _write(tmp_path / "ca.pem", CA_PEM)
    config = _write(
        tmp_path / "client.properties",
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required"
        ' username="alice" password="pa\\"ss";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n",
    )
    security = load({"KAFKRON_CLIENT_CONFIG": config})
    assert security == ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "alice", 'pa"ss', ca)
    kwargs = client_kwargs(security)
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kwargs["sasl_plain_username"] == "alice"
    assert kwargs["sasl_plain_password"] == 'pa"ss'
    assert kwargs["ssl_context"].check_hostname is True


def test_environment_wins_over_the_file_and_password_comes_from_a_file(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=x required username="alice" password="from-file";\n',
    )
    password = _write(tmp_path / "bob.pw", "bobs-password\n")
    security = load(
        {
            "KAFKRON_CLIENT_CONFIG": config,
            "KAFKRON_SASL_MECHANISM": "scram-sha-256",
            "KAFKRON_SASL_USERNAME": "bob",
            "KAFKRON_SASL_PASSWORD_FILE": password,
        }
    )
    assert (security.protocol, security.mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-256")
    assert (security.username, security.password) == ("bob", "bobs-password")


def test_password_never_in_repr_nor_in_errors(tmp_path: Path) -> None:
    secret = "do-not-print-me"
    password = _write(tmp_path / "pw", secret)
    security = load(
        {
            "KAFKRON_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "KAFKRON_SASL_MECHANISM": "SCRAM-SHA-512",
            "KAFKRON_SASL_USERNAME": "alice",
            "KAFKRON_SASL_PASSWORD_FILE": password,
        }
    )
    assert secret not in repr(security)
    with pytest.raises(SecurityConfigError) as refused:
        load({"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL", "KAFKRON_SASL_PASSWORD_FILE": password})
    assert secret not in str(refused.value)
    assert "KAFKRON_SASL_USERNAME" in str(refused.value)


@pytest.mark.parametrize(
    ("environ", "fragment"),
    [
        ({"KAFKRON_SECURITY_PROTOCOL": "TLS"}, "security protocol 'TLS'"),
        (
            {"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL", "KAFKRON_SASL_MECHANISM": "GSSAPI"},
            "SASL mechanism 'GSSAPI'",
        ),
        (
            {"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL", "KAFKRON_SASL_USERNAME": "alice"},
            "KAFKRON_SASL_PASSWORD_FILE",
        ),
        ({"KAFKRON_SASL_PASSWORD_FILE": "/nonexistent/pw"}, "cannot read it"),
        ({"KAFKRON_CLIENT_CONFIG": "/nonexistent/c.properties"}, "cannot read it"),
    ],
)
def test_incomplete_settings_say_what_is_missing(environ: dict[str, str], fragment: str) -> None:
    with pytest.raises(SecurityConfigError, match=fragment.replace("(", r"\(")):
        load(environ)


def test_a_jks_truststore_is_refused_with_the_fix(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.properties",
        "security.protocol=SSL\nssl.truststore.location=/x/truststore.jks\n",
    )
    with pytest.raises(SecurityConfigError, match=re.escape("ssl.truststore.type=PEM")):
        load({"KAFKRON_CLIENT_CONFIG": config})


def test_a_missing_ca_file_is_named(tmp_path: Path) -> None:
    security = ClientSecurity("SSL", cafile=str(tmp_path / "nope.pem"))
    with pytest.raises(SecurityConfigError, match=re.escape("nope.pem does not exist")):
        client_kwargs(security)


def test_the_tools_command_config_round_trips_through_the_client_parser(tmp_path: Path) -> None:
    ca = _write(tmp_path / "ca.pem", CA_PEM)
    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "admin", 'we"ird\\pw', ca)
    path = _write(tmp_path / "admin.properties", command_config(security))
    assert load({"KAFKRON_CLIENT_CONFIG": path}) == security


def test_secure_server_properties_name_every_required_setting(tmp_path: Path) -> None:
    layout = BrokerLayout(port=49700, data_dir=tmp_path)
    (tmp_path / "secure").mkdir()
    props = parse_properties(server_properties(layout))
    assert props["listeners"] == "SASL_SSL://127.0.0.1:49700,CONTROLLER://127.0.0.1:49701"
    assert props["listener.security.protocol.map"] == "CONTROLLER:SSL,SASL_SSL:SASL_SSL"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["authorizer.class.name"] == (
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    )
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin;User:broker"
    # Every secret made for it is private to its owner.
    for secret in (tmp_path / "secure").glob("*.password"):
        assert secret.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path / "secure")
