"""The versions of the named calendars a shard keeps to cut a backlog at each edit
(docs/DESIGN.md §5.7): the stretches, a calendar unknown in one, the bound kept."""

from __future__ import annotations

from actors.shard.calendar_history import HISTORY_MAX, CalendarHistory
from topics.calendar_days import parse_calendar_days

A = parse_calendar_days({"tz": "UTC", "dates": ["2026-10-12"]}, "a")
B = parse_calendar_days({"tz": "UTC", "dates": ["2026-10-13"]}, "b")


def test_a_backlog_is_cut_at_every_edit_of_any_calendar_it_names() -> None:
    history = CalendarHistory()
    history.record("hol", 1, 0, A)
    history.record("fair", 1, 0, B)
    history.record("hol", 2, 100, B)
    history.record("fair", 2, 200, A)
    history.record("hol", 3, 300, A)
    parts = history.stretches(("hol", "fair"), 50)
    assert [(end, versions) for end, versions, _ in parts] == [
        (100, (1, 1)),
        (200, (2, 1)),
        (300, (2, 2)),
    ]
    assert parts[1][2] == {"hol": B, "fair": B}
    assert history.stretches(("hol", "fair"), 300) == []  # nothing after: no splice


def test_a_stretch_with_a_calendar_unknown_drops_it_and_all_before() -> None:
    history = CalendarHistory()
    history.record("hol", 1, 0, A)
    history.record("hol", 2, 100, None)  # deleted
    history.record("hol", 3, 200, B)
    history.record("hol", 4, 300, A)
    assert [(end, v) for end, v, _ in history.stretches(("hol",), 50)] == [(300, (3,))]


def test_only_the_latest_versions_are_kept() -> None:
    history = CalendarHistory()
    for version in range(1, HISTORY_MAX + 3):
        history.record("hol", version, version * 100, A)
    parts = history.stretches(("hol",), 0)
    # The two oldest are gone: the backlog before the oldest kept goes by it.
    assert parts[0][1] == (3,)
    assert len(parts) == HISTORY_MAX - 1
