"""The command line loads the module of the command it names, alone: a scheduler's
start does not import the history store, the audit or the web console."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from actors.cli import COMMAND_MODULES, build_parser, command_module
from tests.kit.paths import REPO


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_each_command_module_registers_the_command_it_is_named_for(module: str) -> None:
    """What the lazy load rests on: command X lives in X_cmd, and nowhere else."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(f"actors.cli.{module}").register(sub)
    assert list(sub.choices) == [module.removesuffix("_cmd")]


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["scheduler", "--session-timeout-ms", "10000"], "scheduler_cmd"),
        (["--client-config", "x.properties", "worker", "--help"], "worker_cmd"),
        (["--client-config", "ls", "ls"], "ls_cmd"),  # the option's value is no command
        (["--client-config=x.properties", "next", "every 5m"], "next_cmd"),
        (["--client", "ls", "history"], "history_cmd"),  # argparse's prefix of the option
        (["--c", "web", "worker"], "worker_cmd"),
        (["--he", "worker"], None),  # a prefix of --help
        (["-h", "scheduler"], None),  # the whole parser's help, as before
        (["--help"], None),
        (["schedulr"], None),  # the whole parser says it is no command, and what are
        ([], None),
    ],
)
def test_the_command_named_picks_its_module(argv: list[str], module: str | None) -> None:
    assert command_module(argv) == module


def test_an_option_prefix_whose_value_names_a_command_parses_as_before() -> None:
    """A properties file named like a command, given with ``--client``: its value is
    the file, the command is the next word."""
    argv = ["--client", "ls", "history"]
    args = build_parser(command_module(argv)).parse_args(argv)
    assert (args.client_config, args.command) == ("ls", "history")


def test_a_command_parsed_alone_reads_its_arguments_as_with_every_command() -> None:
    argv = ["scheduler", "--session-timeout-ms", "12000", "--standbys", "1"]
    alone = vars(build_parser("scheduler_cmd").parse_args(argv))
    every = vars(build_parser().parse_args(argv))
    assert alone == every


def test_starting_the_scheduler_command_imports_no_other_command() -> None:
    code = (
        "import sys\n"
        "from actors.cli import build_parser, command_module\n"
        "build_parser(command_module(['scheduler']))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('actors.'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    commands = [m for m in loaded if m.startswith("actors.cli.") and m.endswith("_cmd")]
    assert commands == ["actors.cli.scheduler_cmd", "actors.cli.topics_cmd"]  # its guard
    assert not [m for m in loaded if m.startswith(("actors.history", "actors.audit", "actors.web"))]
