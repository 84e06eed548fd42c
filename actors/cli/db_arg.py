"""The ``--db`` option of every command that reads or writes the recorder's SQLite
database (`kafkron recorder`, `history`, `audit`, `alerts`, `slo`, `backfill`, `web`):
one spelling and one help text, resolved by `actors.history.default_db_path` when it
is left out."""

from __future__ import annotations

import argparse

HELP = "history database (env KAFKRON_HISTORY_DB, default .kafkron/history.db)"


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help=HELP)
