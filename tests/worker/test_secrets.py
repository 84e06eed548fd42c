"""Named secrets of HTTP targets: the file (JSON or NAME=VALUE), the environment, the
order between them, rotation, and no value in any error."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import pytest

from actors.worker.secrets import SecretError, Secrets, env_name, parse_secrets

VALUE = "Bearer very-secret-value"


def test_the_environment_name_of_a_secret() -> None:
    assert env_name("billing-api") == "KAFKRON_SECRET_BILLING_API"
    assert env_name("crm.token v2") == "KAFKRON_SECRET_CRM_TOKEN_V2"


def test_a_secret_from_the_environment() -> None:
    assert Secrets(environ={"KAFKRON_SECRET_BILLING_API": VALUE}).resolve("billing-api") == VALUE


def test_a_json_file_and_a_lines_file(tmp_path: Path) -> None:
    as_json = tmp_path / "s.json"
    as_json.write_text(orjson.dumps({"billing-api": VALUE}).decode())
    as_lines = tmp_path / "s.env"
    as_lines.write_text(f"# billing\n\nbilling-api={VALUE}\nother = a=b\n")
    assert Secrets(as_json, environ={}).resolve("billing-api") == VALUE
    lines = Secrets(as_lines, environ={})
    assert lines.resolve("billing-api") == VALUE
    assert lines.resolve("other") == " a=b"  # the value as written after the first '='


def test_the_file_comes_before_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "s.env"
    path.write_text("billing-api=from-file\n")
    secrets = Secrets(path, environ={"KAFKRON_SECRET_BILLING_API": "from-env", env_name("x"): "e"})
    assert secrets.resolve("billing-api") == "from-file"
    assert secrets.resolve("x") == "e"


def test_a_rotated_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "s.env"
    path.write_text("token=old-value\n")
    secrets = Secrets(path, environ={})
    assert secrets.resolve("token") == "old-value"
    path.write_text("token=new-value-longer\n")
    os.utime(path, ns=(1, 2))  # a different stamp even within the clock's resolution
    assert secrets.resolve("token") == "new-value-longer"


def test_a_missing_secret_is_named_with_where_it_was_looked_for(tmp_path: Path) -> None:
    path = tmp_path / "s.env"
    path.write_text(f"other={VALUE}\n")
    with pytest.raises(SecretError) as raised:
        Secrets(path, environ={}).resolve("billing-api")
    message = str(raised.value)
    assert "'billing-api'" in message and str(path) in message
    assert "KAFKRON_SECRET_BILLING_API" in message
    assert VALUE not in message


def test_errors_never_hold_a_value(tmp_path: Path) -> None:
    broken = tmp_path / "broken.env"
    broken.write_text(f"ok=1\n{VALUE}\n")
    with pytest.raises(SecretError) as raised:
        Secrets(broken, environ={})
    assert "line 2" in str(raised.value) and VALUE not in str(raised.value)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(orjson.dumps({"a": VALUE}).decode()[:-1] + ",")
    with pytest.raises(SecretError) as raised:
        Secrets(bad_json, environ={})
    assert VALUE not in str(raised.value)
    with pytest.raises(SecretError) as raised:
        Secrets(environ={"KAFKRON_SECRET_X": VALUE + "\r\nX-Evil: 1"}).resolve("x")
    assert "line break" in str(raised.value) and VALUE not in str(raised.value)


def test_a_missing_file_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="secrets file"):
        Secrets(tmp_path / "absent.env")


def test_a_file_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.env"
    path.write_text(f"a={VALUE}\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, "kafkron.worker"):
        Secrets(path, environ={})
    assert "chmod 600" in caplog.text and VALUE not in caplog.text
    caplog.clear()
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, "kafkron.worker"):
        Secrets(path, environ={})
    assert caplog.text == ""


def test_parse_refuses_a_json_file_of_non_strings() -> None:
    with pytest.raises(SecretError, match="names to strings"):
        parse_secrets('{"a": 1}', "f")


def test_redact_marks_every_value_it_is_given() -> None:
    text = f"echo: {VALUE} and {VALUE}"
    assert Secrets.redact(text, [VALUE]) == "echo: [secret] and [secret]"
