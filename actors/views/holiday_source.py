"""Public holidays turned into a calendar's days, from the `holidays` package (optional).

`kafkron calendar add NAME --holidays GB:ENG --years 2026-2030` and
`holiday_days` make a calendar object (``{"tz", "dates"}``) of a country's (and
subdivision's) public holidays for those years, which a ``calendar.upsert`` then
carries like any other: the holidays are read here, once, when the command is made,
never at fire time (docs/DESIGN.md §5.7). Refresh it with the same command when the
years run out or a government adds a day.

The `holidays` package (vacanza/holidays, maintained, a release every few weeks) is an
optional dependency, the ``holidays`` extra; without it this says how to install it.
"""

from __future__ import annotations

import importlib
from typing import Any

MAX_YEARS = 30  # a calendar holds at most 5,000 dates: 30 years of any country's holidays


class HolidaysUnavailable(RuntimeError):
    """The `holidays` package is not installed, or does not know the country."""


def parse_region(text: str) -> tuple[str, str | None]:
    """``GB`` or ``GB:ENG`` (ISO 3166-1 alpha-2 country, then its subdivision)."""
    country, _, subdiv = text.partition(":")
    if not country.strip():
        raise ValueError(
            f"--holidays {text!r}: expected COUNTRY or COUNTRY:SUBDIVISION, e.g. GB:ENG"
        )
    return country.strip().upper(), subdiv.strip().upper() or None


def parse_years(text: str) -> range:
    """``2026`` or ``2026-2030`` (both included)."""
    first, _, last = text.partition("-")
    try:
        years = range(int(first), int(last or first) + 1)
    except ValueError:
        raise ValueError(f"--years {text!r}: expected YEAR or FIRST-LAST, e.g. 2026-2030") from None
    if not 1 <= len(years) <= MAX_YEARS:
        raise ValueError(f"--years {text!r}: between 1 and {MAX_YEARS} years")
    return years


def holiday_days(
    country: str, years: range, *, subdiv: str | None = None, tz: str = "UTC"
) -> dict[str, Any]:
    """The calendar object of ``country``'s public holidays (``subdiv``'s too) in
    ``years``, as days of ``tz``.

    Example: ``holiday_days("GB", range(2026, 2029), subdiv="ENG", tz="Europe/London")``.
    """
    try:
        module = importlib.import_module("holidays")
    except ImportError:
        raise HolidaysUnavailable(
            "the holidays package is not installed: pip install 'kafkron[holidays]'"
        ) from None
    try:
        found = module.country_holidays(country, subdiv=subdiv, years=list(years))
    except NotImplementedError as exc:  # an unknown country or subdivision
        raise HolidaysUnavailable(f"holidays does not know {country!r}: {exc}") from None
    dates = sorted({day.isoformat() for day in found})
    return {"tz": tz, "dates": dates}
