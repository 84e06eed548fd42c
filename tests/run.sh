#!/usr/bin/env bash
# The one test command: every test, the real-broker ones and the cluster ones included.
#
#   tests/run.sh                   # all tests (needs `kafkron broker start` first); the
#                                  # cluster group last, on a three-node cluster of its own
#   tests/run.sh -m "not cluster"  # the fast group: everything but the three-node cluster
#   tests/run.sh -m cluster        # the cluster group alone (KAFKRON_CLUSTER_PORT: a cluster
#                                  # already started with `kafkron broker start --nodes 3`)
#   tests/run.sh -m "not broker"   # the pure tests alone, no Kafka needed
#   tests/run.sh tests/worker      # one layer: its pure tests (tests/broker/worker: Kafka)
#
# Layout (tests/README.md): one folder per layer (timespec, wheel, shard, scheduler,
# worker, dag, history, topics, security, simulation, cli, web, observe, launcher, faust,
# meta); tests/broker/ holds every test file that needs Kafka, in folders of the same
# names, tests/broker/cluster/ the three-node ones. Shared helpers are the package
# tests.kit (tests/kit/<layer>.py), the workers' job modules tests.jobs (`--jobs
# tests.jobs.worker`), data tests/fixtures/. tests/slow/ runs only when named.
# pyproject's testpaths is tests/, so a path argument runs only that path.
# Uses $PYTHON, else the project's .venv, else python3. Extra arguments go to pytest.
# Exits with pytest's status; "no tests collected" (5) counts as a failure too.
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi
"$python" -m pytest -q "$@"
status=$?
if [[ $status -eq 5 ]]; then
  echo "tests/run.sh: pytest collected no tests; that is a failure" >&2
fi
exit $status
