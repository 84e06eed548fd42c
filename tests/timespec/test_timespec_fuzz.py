"""Whatever a command carries, compiling it raises SpecError or yields a working spec.

A shard feeds untrusted JSON into ``compile_spec``; any other exception would stall
the partition (docs/DESIGN.md §3.6: bad input never stalls a shard).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.timespec import SpecError, compile_spec

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
cron_like = st.lists(
    st.sampled_from(
        [
            "*",
            "*/5",
            "1-5",
            "H",
            "H/3",
            "H(1-9)",
            "L",
            "MON",
            "jan",
            "7",
            "0",
            "60",
            "32",
            "²",
            "٣",
            "1-",
            "-1",
            "5/0",
            "H(9-1)",
            ",",
            "?",
            "#",
            "W",
            "1,2",
            "99999999999999999999",
        ]
    ),
    min_size=0,
    max_size=7,
).map(" ".join)
specs = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"cron": cron_like},
        optional={"tz": st.sampled_from(["UTC", "Europe/Paris", "", "x/../y", "Etc/GMT+5", 4])},
    ),
    st.fixed_dictionaries(
        {
            "every": st.one_of(
                st.text(max_size=8), st.sampled_from(["1s", "99999999d", "1h1h", "３s"])
            )
        },
        optional={"anchor": json_values},
    ),
    st.fixed_dictionaries(
        {
            "at": st.one_of(
                json_values,
                st.sampled_from(
                    [
                        "2026-01-01T00:00:00Z",
                        "0001-01-01T00:00:00+14:00",
                        "9999-12-31T23:59:59-12:00",
                    ]
                ),
            )
        }
    ),
)
instants = st.integers(-(2**53), 2**53)


@settings(max_examples=400, deadline=None)
@given(
    spec=specs,
    dst=st.one_of(
        st.none(),
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "gap": st.sampled_from(["shift", "skip", "x"]),
                "fold": st.sampled_from(["once", "twice", 1]),
            },
        ),
    ),
    window=st.one_of(st.integers(-5, 10**9), json_values),
    start=st.one_of(st.none(), st.integers(-(2**53), 2**53), json_values),
    end=st.one_of(st.none(), st.integers(-(2**53), 2**53)),
    after=instants,
)
def test_compile_raises_only_spec_error_and_next_after_never_raises(
    spec: Any, dst: Any, window: Any, start: Any, end: Any, after: int
) -> None:
    try:
        compiled = compile_spec(
            spec, schedule_id="fuzz", dst=dst, spread_window_s=window, start_ms=start, end_ms=end
        )
    except SpecError:
        return
    assert compiled.kind in ("cron", "every", "at")
    fire = compiled.next_after(after)
    assert fire is None or fire > after
