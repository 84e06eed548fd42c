"""Running `kafkron` commands in-process for the CLI tests."""

from __future__ import annotations

import pytest

from actors.cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``kafkron ARGV`` (argparse's exit 2 included)."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err
