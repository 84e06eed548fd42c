"""The one exception of the time-spec package.

Defined by the wire layer (`topics.spec_compiler`), which catches it while decoding
commands without importing this package; re-exported here for the time rules.
"""

from __future__ import annotations

from topics.spec_compiler import SpecError

__all__ = ["SpecError"]
