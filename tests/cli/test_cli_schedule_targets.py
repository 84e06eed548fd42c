"""`kafkron schedule add --to-topic|--http-post`: the target command the flags make (--print)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.kit.cli import cli
from topics.commands import ScheduleUpsert, decode_command
from topics.targets import HTTP_JOB, KAFKA_JOB

ADD = ("schedule", "add", "order-due", "--every", "1h")


def printed(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, object]:
    code, out, err = cli(capsys, *ADD, *flags, "--print")
    assert code == 0, err
    body: dict[str, object] = json.loads(out)
    decoded = decode_command(b"order-due", out.strip().encode(), 0)
    assert isinstance(decoded, ScheduleUpsert), decoded
    return body


def test_to_topic_builds_a_kafka_target_with_key_value_and_headers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = printed(
        capsys,
        "--to-topic", "orders.due", "--key", "{schedule_id}",
        "--value", '{"order": "o-1", "due": "{scheduled_at}"}',
        "--header", "source=kafkron", "--header", "trace=a=b",
    )  # fmt: skip
    assert "job" not in body
    assert body["target"] == {
        "kafka": {
            "topic": "orders.due",
            "key": "{schedule_id}",
            "value": {"order": "o-1", "due": "{scheduled_at}"},
            "headers": {"source": "kafkron", "trace": "a=b"},
        }
    }


def test_raw_value_file_is_sent_as_base64_and_decodes_to_the_carrier_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "value.bin"
    raw.write_bytes(b"\x00\xffbytes")
    code, out, _ = cli(
        capsys, *ADD, "--to-topic", "orders.raw", "--raw-value-file", str(raw), "--print"
    )
    assert code == 0
    value = json.loads(out)["target"]["kafka"]["value"]
    assert base64.b64decode(value["base64"]) == b"\x00\xffbytes"
    decoded = decode_command(b"order-due", out.strip().encode(), 0)
    assert isinstance(decoded, ScheduleUpsert) and decoded.job.name == KAFKA_JOB
    assert decoded.job.args["key"] is None


def test_http_post_builds_an_http_target_with_named_secrets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = printed(
        capsys,
        "--http-post", "https://billing.example/charge", "--body", '{"run": "{run_id}"}',
        "--http-header", "Authorization=secret:billing-api", "--http-header", "X-Team=billing",
        "--http-timeout-s", "20", "--http-method", "put", "--max-attempts", "3",
    )  # fmt: skip
    assert body["target"] == {
        "http": {
            "url": "https://billing.example/charge",
            "method": "put",
            "headers": {"Authorization": {"secret": "billing-api"}, "X-Team": "billing"},
            "body": {"run": "{run_id}"},
            "timeout_s": 20,
        }
    }
    assert body["retry"] == {"max_attempts": 3}
    decoded = decode_command(b"order-due", json.dumps(body).encode(), 0)
    assert isinstance(decoded, ScheduleUpsert)
    assert decoded.job.name == HTTP_JOB and decoded.job.args["method"] == "PUT"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ((), "one of the arguments --job --to-topic --http-post is required"),
        (("--job", "j", "--to-topic", "t", "--value", "1"), "not allowed with argument --job"),
        (("--to-topic", "t", "--http-post", "https://e.com"), "not allowed with argument"),
        (("--to-topic", "t"), "--to-topic needs the record's value"),
        (("--to-topic", "a b", "--value", "1"), "--to-topic: target.kafka.topic"),
        (("--to-topic", "t", "--value", "{nope"), "--value '{nope' is not JSON"),
        (("--to-topic", "t", "--value", '"{nope}"'), "--value: target.kafka.value"),
        (("--to-topic", "t", "--value", "1", "--key", "{x}"), "--key: target.kafka.key"),
        (("--to-topic", "t", "--value", "1", "--header", "kafkron-x=1"), "--header: target"),
        (("--to-topic", "t", "--value", "1", "--header", "novalue"), "--header 'novalue'"),
        (("--to-topic", "t", "--value", "1", "--body", "{}"), "--body applies to --http-post"),
        (("--to-topic", "t", "--raw-value-file", "/nonexistent/f"), "--raw-value-file"),
        (("--job", "j", "--value", "1"), "--value applies to --to-topic only"),
        (("--http-post", "ftp://e.com"), "--http-post: target.http.url"),
        (("--http-post", "https://e.com", "--http-method", "YELL"), "--http-method: target"),
        (("--http-post", "https://e.com", "--http-timeout-s", "0"), "--http-timeout-s: target"),
        (("--http-post", "https://e.com", "--args", "{}"), "--args applies to --job only"),
        (("--http-post", "https://e.com", "--key", "k"), "--key applies to --to-topic only"),
        (("--to-topic", "kafkron.x", "--job", "kafkron.kafka"), "not allowed with"),
        (("--job", "kafkron.kafka"), "job.name"),
    ],
)
def test_bad_target_flags_exit_2_naming_the_flag(
    flags: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, *ADD, *flags, "--print")
    assert code == 2
    assert says in err
    assert out == ""


def test_next_of_a_target_command_says_where_each_fire_goes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, command, _ = cli(capsys, *ADD, "--to-topic", "orders.due", "--value", "1", "--print")
    code, out, _ = cli(capsys, "next", command, "-n", "2", "--from", "2026-01-01T00:00:00Z")
    assert code == 0
    assert out.splitlines() == [
        "2026-01-01T01:00:00.000Z  → kafka:orders.due",
        "2026-01-01T02:00:00.000Z  → kafka:orders.due",
    ]
    _, command, _ = cli(capsys, *ADD, "--http-post", "https://e.example/h", "--print")
    _, out, _ = cli(capsys, "next", command, "-n", "1", "--from", "2026-01-01T00:00:00Z")
    assert out == "2026-01-01T01:00:00.000Z  → POST https://e.example/h\n"
    _, out, _ = cli(capsys, "next", "every 1h", "-n", "1", "--from", "2026-01-01T00:00:00Z")
    assert out == "2026-01-01T01:00:00.000Z\n"  # a spec alone: the instants only
