"""Shared definitions and any specs: an H inside a member is the schedule's own
(docs/DESIGN.md §5.6); the shard shares compiled specs between schedules only when
they cannot differ."""

from __future__ import annotations

from actors.shard.definition import clear_caches, definition_bytes, shared_definition
from actors.timespec import compile_spec
from topics.codec import dumps
from topics.command_types import ScheduleUpsert
from topics.commands import decode_command
from topics.timefmt import parse_instant

JUNE = parse_instant("2026-06-01T00:00:00Z")


def _upsert(schedule_id: str, spec: dict[str, object]) -> ScheduleUpsert:
    body = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": spec,
        "job": {"name": "p.r"},
    }
    command = decode_command(schedule_id.encode(), dumps(body), 0)
    assert isinstance(command, ScheduleUpsert)
    return command


def test_an_h_inside_an_any_spec_is_drawn_per_schedule() -> None:
    clear_caches()
    spec = {"any": [{"cron": "H 9 * * *"}], "exclude": [{"calendar": {"weekdays": ["SUN"]}}]}
    fires = set()
    for schedule_id in ("alpha", "bravo", "charlie", "delta"):
        command = _upsert(schedule_id, spec)
        definition = shared_definition(command, definition_bytes(command))
        fire = definition.compiled.next_after(JUNE)
        assert fire == compile_spec(spec, schedule_id=schedule_id).next_after(JUNE)
        fires.add(fire)
    assert len(fires) > 1


def test_an_any_spec_without_h_is_shared() -> None:
    clear_caches()
    spec = {"any": [{"cron": "0 9 * * *"}], "exclude": [{"calendar": {"weekdays": ["SUN"]}}]}
    first, second = _upsert("alpha", spec), _upsert("bravo", spec)
    one = shared_definition(first, definition_bytes(first))
    two = shared_definition(second, definition_bytes(second))
    assert one is two


def test_the_audit_reads_an_h_inside_an_any_spec_as_the_shard_does() -> None:
    from actors.audit.walk import depends_on_id

    inside = {"spec": {"any": [{"every": "1h"}, {"cron": "H 9 * * *"}]}, "spread_window_s": 0}
    excluded = {"spec": {"any": [{"every": "1h"}], "exclude": [{"cron": "H 0 * * SUN"}]}}
    plain = {"spec": {"any": [{"cron": "0 9 * * *"}]}, "spread_window_s": 0}
    assert depends_on_id(inside) and depends_on_id(excluded) and not depends_on_id(plain)
