"""The history actor: what ran, when, for how long, and whether it worked.

`recorder` consumes ``{ns}.runs``, ``{ns}.results``, ``{ns}.dlq`` and
``{ns}.rejected`` (read_committed) into a SQLite database (`store`, `schema`);
`kafkron history` and `kafkron rejected` read it.
"""

import os
from pathlib import Path

DEFAULT_DB_PATH = Path(".kafkron") / "history.db"


def default_db_path() -> Path:
    """``$KAFKRON_HISTORY_DB``, else ``.kafkron/history.db`` under the current directory."""
    env = os.environ.get("KAFKRON_HISTORY_DB")
    return Path(env) if env else DEFAULT_DB_PATH
