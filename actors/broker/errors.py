"""The one error type of the broker package."""

from __future__ import annotations


class BrokerError(Exception):
    """A local-broker failure, worded as one line that says what to do next.

    The CLI prints ``str(error)`` and exits 1; nothing else of the broker package
    is meant to escape to a user.
    """
