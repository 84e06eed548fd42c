"""Property tests: our next fire against cronsim and croniter.

The three disagree on purpose in places, so each comparison is made only where the
semantics are defined to agree:

- UTC (no transitions): every expression, five or six fields, against cronsim.
- Any zone, any expression and any DST policy, against a *rule oracle*: cronsim
  lists the matching wall times (in naive, zone-free mode, so it does pure field
  matching), and zoneinfo maps each wall time to instants by the rule of
  docs/DESIGN.md §5.3 (real once, repeated twice, skipped none; then the policy for fixed-time
  schedules). This checks our stretch-walking code with independent field parsing
  and independent zone arithmetic. Instants are drawn near real transitions.
- Any zone, five-field fixed-time expressions, default policy, against cronsim's
  own zone mode, which emulates cronie for exactly those (shift out of a gap,
  first occurrence in a fold). Excluded: an "after" instant inside the second pass
  of a fold, where cronsim restarts from the wall time and returns an earlier
  instant (it iterates wall time, so it cannot tell the two passes apart).
- croniter, away from DST transitions only: croniter fires fixed-time jobs twice in
  a fold and does not follow cronie in gaps (docs/DESIGN.md §5.3). It also treats a
  day-of-month like ``*/2`` as restricted where cronie treats it as ``*``, so the
  expressions drawn for it keep day fields unambiguous.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from actors.timespec import SpecError, compile_spec

ZONES = (
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Havana",
    "Asia/Kolkata",
    "Europe/Berlin",
    "America/Sao_Paulo",
    "Pacific/Chatham",
    "America/St_Johns",
    "Africa/Casablanca",
    "Asia/Tehran",
    "Pacific/Auckland",
    "America/Santiago",
    "Europe/Chisinau",
    "Antarctica/Troll",
)
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@st.composite
def items(draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None) -> str:
    def value() -> str:
        v = draw(st.integers(lo, hi))
        if names and draw(st.booleans()):
            return names[(v - lo) % len(names)]
        return str(v)

    def one() -> str:
        kind = draw(st.sampled_from(["*", "*/n", "a", "a-b", "a-b/n", "a/n"]))
        if kind == "*":
            return "*"
        if kind == "*/n":
            return f"*/{draw(st.integers(1, hi - lo + 1))}"
        if kind == "a":
            return value()
        a = draw(st.integers(lo, hi))
        if kind == "a/n":
            if a == hi:  # "23/1" is "23-23/1", which croniter 5 misreads as "0-0" above
                return str(a)
            return f"{a}/{draw(st.integers(1, hi - lo + 1))}"
        b = draw(st.integers(a, hi))
        rng = f"{a}-{b}"
        if a == b:  # cronsim reads "5-5/2" as "5/2", croniter misreads "0-0": avoid both
            return str(a)
        if kind == "a-b":
            return rng
        return f"{rng}/{draw(st.integers(1, hi - lo + 1))}"

    return ",".join(one() for _ in range(draw(st.integers(1, 3))))


@st.composite
def cron_exprs(draw: st.DrawFn, six: bool | None = None) -> str:
    minute = draw(items(0, 59))
    hour = draw(items(0, 23))
    dom = draw(st.one_of(items(1, 31), st.just("L"), st.just("*")))
    month = draw(st.one_of(st.just("*"), items(1, 12, MONTHS)))
    dow = draw(st.one_of(st.just("*"), items(0, 7, DAYS)))
    fields = [minute, hour, dom, month, dow]
    if six if six is not None else draw(st.booleans()):
        # A sparse seconds field keeps the brute-force oracle quick.
        seconds = draw(st.lists(st.integers(0, 59), min_size=1, max_size=3, unique=True))
        fields.insert(0, ",".join(map(str, seconds)))
    return " ".join(fields)


def compiled(expr: str, zone: str, dst: dict[str, str] | None = None) -> object:
    try:
        return compile_spec({"cron": expr, "tz": zone}, schedule_id="oracle", dst=dst)
    except SpecError:
        return None


def cronsim_next_naive(expr: str, wall: datetime) -> datetime | None:
    try:
        return next(CronSim(expr, wall))
    except StopIteration:
        return None


instants_s = st.integers(
    int(datetime(2000, 1, 1, tzinfo=UTC).timestamp()),
    int(datetime(2040, 1, 1, tzinfo=UTC).timestamp()),
)


@settings(max_examples=200, deadline=None)
@given(expr=cron_exprs(), after_s=instants_s)
def test_utc_matches_cronsim(expr: str, after_s: int) -> None:
    spec = compiled(expr, "UTC")
    assume(spec is not None)
    ours = spec.next_after(after_s * 1000)  # type: ignore[attr-defined]
    start = datetime.fromtimestamp(after_s, UTC).replace(tzinfo=None)
    theirs = cronsim_next_naive(expr, start)
    assert theirs is not None
    assert ours == int(theirs.replace(tzinfo=UTC).timestamp()) * 1000


# --- the rule oracle ----------------------------------------------------------------


def offset_at(zone: ZoneInfo, instant_s: int) -> timedelta:
    off = datetime.fromtimestamp(instant_s, zone).utcoffset()
    assert off is not None
    return off


@lru_cache(maxsize=1024)
def transitions_in(zone: ZoneInfo, year: int) -> list[int]:
    """Offset changes in a year, by daily probes and bisection (test-local, naive)."""
    t = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    found = []
    while t < end:
        if offset_at(zone, t) != offset_at(zone, t + 86_400):
            a, b = t, t + 86_400
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if offset_at(zone, mid) == offset_at(zone, a) else (a, mid)
            found.append(b)
        t += 86_400
    return found


def instants_of_wall(
    zone: ZoneInfo, wall: datetime, wildcard: bool, gap_shift: bool, fold_once: bool
) -> list[int]:
    u0 = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    u1 = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    real = sorted(
        {u for u in (u0, u1) if datetime.fromtimestamp(u, zone).replace(tzinfo=None) == wall}
    )
    if real:
        if len(real) == 2 and fold_once and not wildcard:
            return real[:1]  # fixed-time, fold once: the first occurrence
        return real
    if wildcard or not gap_shift:
        return []  # a skipped wall time is not real
    a, b = min(u0, u1), max(u0, u1)  # the transition is in (a, b]
    before = offset_at(zone, a)
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if offset_at(zone, mid) == before else (a, mid)
    return [b]  # the first instant after the gap


def rule_oracle(expr: str, zone_name: str, after_s: int, dst: dict[str, str]) -> int | None:
    zone = ZoneInfo(zone_name)
    fields = expr.split()
    minute, hour = (fields[0], fields[1]) if len(fields) == 5 else (fields[1], fields[2])
    wildcard = minute.startswith("*") or hour.startswith("*")
    gap_shift, fold_once = dst["gap"] == "shift", dst["fold"] == "once"
    margin = timedelta(hours=4)  # more than any offset change in these zones and years
    wall_after = datetime.fromtimestamp(after_s, zone).replace(tzinfo=None)
    wall = wall_after - margin - timedelta(seconds=1)
    best: int | None = None
    best_wall: datetime | None = None
    while True:
        nxt = cronsim_next_naive(expr, wall)
        if nxt is None:
            return best
        wall = nxt
        if best_wall is not None and wall > best_wall + margin:
            return best
        for u in instants_of_wall(zone, wall, wildcard, gap_shift, fold_once):
            if u > after_s and (best is None or u < best):
                best, best_wall = u, wall


@settings(max_examples=150, deadline=None)
@given(
    expr=cron_exprs(),
    zone_name=st.sampled_from(ZONES),
    year=st.integers(2005, 2035),
    pick=st.integers(0, 10),
    delta_s=st.integers(-2 * 86_400, 2 * 86_400),
    gap=st.sampled_from(["shift", "skip"]),
    fold=st.sampled_from(["once", "twice"]),
)
def test_any_zone_and_policy_matches_the_rule_oracle(
    expr: str, zone_name: str, year: int, pick: int, delta_s: int, gap: str, fold: str
) -> None:
    zone = ZoneInfo(zone_name)
    near = transitions_in(zone, year)
    base = near[pick % len(near)] if near else int(datetime(year, 6, 1, tzinfo=UTC).timestamp())
    after_s = base + delta_s
    dst = {"gap": gap, "fold": fold}
    spec = compiled(expr, zone_name, dst)
    assume(spec is not None)
    expected = rule_oracle(expr, zone_name, after_s, dst)
    ours = spec.next_after(after_s * 1000)  # type: ignore[attr-defined]
    assert ours == (None if expected is None else expected * 1000)


@settings(max_examples=100, deadline=None)
@given(
    expr=cron_exprs(six=False),
    zone_name=st.sampled_from(ZONES),
    year=st.integers(2005, 2035),
    pick=st.integers(0, 10),
    delta_s=st.integers(-2 * 86_400, 2 * 86_400),
)
def test_fixed_time_in_zones_matches_cronsim(
    expr: str, zone_name: str, year: int, pick: int, delta_s: int
) -> None:
    minute, hour = expr.split()[:2]
    assume(not minute.startswith("*") and not hour.startswith("*"))
    zone = ZoneInfo(zone_name)
    near = transitions_in(zone, year)
    base = near[pick % len(near)] if near else int(datetime(year, 6, 1, tzinfo=UTC).timestamp())
    after = datetime.fromtimestamp(base + delta_s, zone)
    assume(after.fold == 0)  # see the module docstring
    spec = compiled(expr, zone_name)
    assume(spec is not None)
    try:
        theirs = next(CronSim(expr, after))
    except StopIteration:
        return
    ours = spec.next_after(int(after.timestamp()) * 1000)  # type: ignore[attr-defined]
    assert ours == int(theirs.timestamp()) * 1000


@st.composite
def croniter_exprs(draw: st.DrawFn) -> str:
    """Expressions on which croniter and cronie agree about day-of-month/day-of-week."""
    minute = draw(items(0, 59))
    hour = draw(items(0, 23))
    dom = draw(st.sampled_from(["*", "1", "15", "28", "L", "3-9", "10,20"]))
    dow = draw(st.sampled_from(["*", "MON", "1-5", "SAT,SUN", "3"]))
    month = draw(st.sampled_from(["*", "JAN-JUN", "3", "*/2", "FEB,AUG"]))
    return f"{minute} {hour} {dom} {month} {dow}"


@settings(max_examples=120, deadline=None)
@given(expr=croniter_exprs(), zone_name=st.sampled_from(ZONES), after_s=instants_s)
def test_matches_croniter_away_from_transitions(expr: str, zone_name: str, after_s: int) -> None:
    spec = compiled(expr, zone_name)
    assume(spec is not None)
    zone = ZoneInfo(zone_name)
    start = datetime.fromtimestamp(after_s, zone)
    theirs = int(croniter(expr, start).get_next(float))
    assume(theirs - after_s < 40 * 86_400)
    # Away from transitions: one offset from a day before to a day after.
    probes = range(after_s - 86_400, theirs + 86_400, 1800)
    assume(len({offset_at(zone, t) for t in probes}) == 1)
    assert spec.next_after(after_s * 1000) == theirs * 1000  # type: ignore[attr-defined]
