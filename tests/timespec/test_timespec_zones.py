"""Zone stretches against zoneinfo's own transition list.

The stretch builder probes offsets once a day (see ``actors.timespec.zones``), which
is exact only if no two offset changes are closer than a day. The first test checks
that premise for every zone tzdata ships, using the transition list of zoneinfo's
pure-Python implementation as ground truth; the second compares the stretches
themselves for a set of zones over decades.
"""

from __future__ import annotations

import itertools
import zoneinfo
from datetime import UTC, datetime
from zoneinfo._zoneinfo import ZoneInfo as PyZoneInfo  # the reference: its tables are readable

import pytest

from actors.timespec import SpecError
from actors.timespec.zones import _PROBE_S, load_zone

FROM_S = int(datetime(1970, 1, 1, tzinfo=UTC).timestamp())
TO_S = int(datetime(2038, 1, 1, tzinfo=UTC).timestamp())


def offset_changes(name: str, lo_s: int, hi_s: int) -> list[int]:
    """Instants in [lo, hi) where the UTC offset changes, from zoneinfo's table."""
    ref = PyZoneInfo.no_cache(name)
    table: list[int] = list(ref._trans_utc)
    return [
        t
        for t in table
        if lo_s <= t < hi_s
        and datetime.fromtimestamp(t - 1, ref).utcoffset()
        != datetime.fromtimestamp(t, ref).utcoffset()
    ]


def test_no_zone_has_two_offset_changes_closer_than_the_probe() -> None:
    closest = (TO_S - FROM_S, "")
    for name in sorted(zoneinfo.available_timezones()):
        try:
            changes = offset_changes(name, FROM_S - 2 * 86_400, TO_S)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            continue
        for a, b in itertools.pairwise(changes):
            closest = min(closest, (b - a, name))
    assert closest[0] >= 2 * _PROBE_S, closest


@pytest.mark.parametrize(
    "name",
    [
        "America/New_York",
        "Europe/London",
        "Australia/Lord_Howe",
        "America/Havana",
        "Asia/Kolkata",
        "Africa/Casablanca",
        "Pacific/Apia",
        "America/Sao_Paulo",
        "Europe/Moscow",
        "Antarctica/Troll",
    ],
)
def test_stretches_match_zoneinfo_transitions(name: str) -> None:
    table = load_zone(name)
    lo = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp())
    found: set[int] = set()
    t = lo
    while t < TO_S:
        stretch = table.stretch_at(t)
        if stretch.offset_before_s != stretch.offset_s:
            found.add(stretch.start_s)
        assert stretch.start_s <= t < stretch.end_s
        assert stretch.offset_s == table.offset_s(t) == table.offset_s(stretch.end_s - 1)
        t = stretch.end_s
    assert found == set(offset_changes(name, lo, TO_S))


def test_pacific_apia_skipped_a_whole_day_and_a_fixed_job_shifts_out_of_it() -> None:
    """Samoa jumped from 2011-12-29 23:59:59 -10:00 to 2011-12-31 00:00 +14:00."""
    from actors.timespec import compile_spec
    from topics.timefmt import format_ms, parse_instant

    spec = compile_spec({"cron": "0 12 * * *", "tz": "Pacific/Apia"}, schedule_id="apia")
    t = parse_instant("2011-12-29T12:00:00Z")
    got = []
    for _ in range(3):
        nxt = spec.next_after(t)
        assert nxt is not None
        got.append(format_ms(nxt))
        t = nxt
    # Dec 29 12:00 -10:00 = 22:00Z; Dec 30 does not exist: shifted to the jump
    # (Dec 30 10:00Z); Dec 31 12:00 +14:00 = Dec 30 22:00Z.
    assert got == [
        "2011-12-29T22:00:00.000Z",
        "2011-12-30T10:00:00.000Z",
        "2011-12-30T22:00:00.000Z",
    ]


def test_unknown_zone_points_at_spec_tz() -> None:
    with pytest.raises(SpecError, match=r"^spec\.tz: unknown time zone 'Mars/Olympus'"):
        load_zone("Mars/Olympus")
    with pytest.raises(SpecError, match=r"^spec\.tz"):
        load_zone("../etc/passwd")
