"""The security commands without Kafka: `acl plan`, password files, refusal wording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiokafka.errors import TopicAuthorizationFailedError, TransactionalIdAuthorizationFailed

from actors.cli.users_cmd import _password
from tests.kit.cli import cli
from topics.acl_plan import Operation
from topics.refusals import from_error


def test_acl_plan_prints_the_table_and_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "acl", "plan", "--namespace", "shop", "--role", "submitter")
    assert code == 0
    assert "submitter  topic     literal  shop.commands  Write" in out
    assert "--allow-principal User:submitter --operation Write --topic shop.commands" in out
    assert "worker" not in out


def test_acl_plan_json_and_a_bad_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "acl", "plan", "--namespace", "shop", "--json")
    assert code == 0
    plan = json.loads(out)
    assert set(plan) == {"scheduler", "worker", "recorder", "submitter", "viewer"}
    assert {"resource": "transactional-id", "pattern": "prefixed", "name": "shop.worker.",
            "operation": "Write"} in plan["worker"]  # fmt: skip
    code, _, err = cli(capsys, "acl", "plan", "--namespace", "a.b")
    assert code == 2
    assert "no '.'" in err


def test_acl_plan_migrate_is_per_principal_and_adds_before_it_removes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = cli(capsys, "acl", "plan", "--namespace", "shop", "--migrate")
    assert code == 2 and "--role and --principal" in err
    argv = ("acl", "plan", "--namespace", "shop", "--migrate", "--role", "worker")
    code, out, _ = cli(capsys, *argv, "--principal", "User:w-eu1")
    assert code == 0
    add, remove = out.split("# once every process")
    assert "--add --allow-principal User:w-eu1" in add and "--transactional-id shop.worker." in add
    assert "--remove --force --allow-principal User:w-eu1" in remove
    assert "--transactional-id shop-worker- " in remove and "shop.worker." not in remove
    code, out, _ = cli(capsys, *argv[:-1], "submitter", "--principal", "User:s")
    assert code == 0 and "kafka-acls.sh" not in out  # a role without transactional ids


def test_a_missing_password_file_is_made_private_and_random(tmp_path: Path) -> None:
    path = tmp_path / "alice.pw"
    password, created = _password(path)
    assert created and len(password) >= 24
    assert path.stat().st_mode & 0o777 == 0o600
    assert _password(path) == (password, False)


def test_a_password_the_tools_cannot_carry_is_refused_without_echo(tmp_path: Path) -> None:
    path = tmp_path / "bad.pw"
    path.write_text("has,comma]secret\n")
    with pytest.raises(ValueError) as refused:
        _password(path)
    assert "has,comma]secret" not in str(refused.value)


def test_authorization_errors_become_named_refusals() -> None:
    topic = from_error(TopicAuthorizationFailedError("shop.runs"), "shop", Operation.WRITE)
    assert topic is not None
    assert "may not Write topic shop.runs: Write is granted to role scheduler" in str(topic)
    txn = from_error(TransactionalIdAuthorizationFailed("shop.shard.0"), "shop")
    assert txn is not None
    assert "transactional-id shop.shard.0" in str(txn) and "role scheduler" in str(txn)
    assert from_error(ValueError("x"), "shop") is None
