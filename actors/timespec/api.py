"""The protocol every compiled spec satisfies (what schedule actors code against).

It is defined by the wire layer (`topics.spec_compiler`), which hands compiled specs
to the shard without importing this package; re-exported here for the time rules.
"""

from __future__ import annotations

from topics.spec_compiler import CompiledSpec

__all__ = ["CompiledSpec"]
