"""The job of the Faust example's broker test (``--jobs tests.jobs.faust``).

``test.call_upstream`` fails while the file ``$KAFKRON_TEST_UPSTREAM`` does not exist
(the upstream is down) and succeeds once it does: the test's health check looks at
the same file, so the replay agent replays exactly when a replay can succeed.
"""

from __future__ import annotations

import os
from pathlib import Path

from actors import RunContext, job


class UpstreamDown(ConnectionError):
    pass


@job("test.call_upstream")
def call_upstream(ctx: RunContext) -> None:
    if not Path(os.environ["KAFKRON_TEST_UPSTREAM"]).exists():
        raise UpstreamDown(f"upstream down on attempt {ctx.attempt}")
