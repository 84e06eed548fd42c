"""The three-node cluster's fault tests: ``python -m pytest -q tests_cluster``.

Outside `tests/` (and so outside `.ci/run`) for now: the group took about half an
hour on a heavily loaded two-core machine, about 7 minutes on a quiet one, and has
not yet been timed inside a whole CI run. All five scenarios pass. They share the
kits of `tests/`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
