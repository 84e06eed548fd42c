#!/usr/bin/env bash
# The wheel as a user gets it: build kafkron's wheel, install it into a fresh
# virtualenv in a temporary directory, and from a directory outside the checkout run
# what must work from an install (the editable install of the tests would hide a
# file left out of the wheel, or a path that only resolves inside the checkout):
#   - kafkron simulate --list and kafkron simulate midnight-reboot --seed 1 (the
#     bundled scenarios, found by name inside the installed package);
#   - kafkron next (the time specs and the zone data);
#   - kafkron web's first page (the packaged templates), status 200 and its title;
#   - the README's "From Python" program, as a user copies it, against a scheduler
#     and a billing worker of the wheel: 100 one-offs, each waited for and printed.
# The simulation and next need no broker; the web console reads its namespace's
# schedules topic, so that part needs the broker at KAFKRON_BOOTSTRAP (.ci/run runs
# this beside its fast group) and creates, then deletes, a namespace of its own.
# Everything it made (the temporary directory, the console, the topics) goes on exit.
#
# Environment: PYTHON (default python3; builds the wheel and makes the virtualenv),
# KAFKRON_BOOTSTRAP (default the local broker), TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="$PWD"
python="${PYTHON:-python3}"
started_s=$(date +%s)
step() { echo "-- wheel check [$(($(date +%s) - started_s)) s] $*"; }
fail() { echo "wheel check: $*" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/kafkron-wheel.XXXXXX")"
venv="$tmp/venv"
bin="$venv/bin"
namespace="wheelcheck-$$-$RANDOM"
web_pid=""
actor_pids=()
topics_made=false
cleanup() {
  for pid in "$web_pid" "${actor_pids[@]}"; do
    if [[ -n "$pid" ]]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if $topics_made; then
    (cd "$tmp" && KAFKRON_NAMESPACE="$namespace" "$bin/python" -c '
import asyncio
from topics.admin import delete_topics
from topics.names import Settings
asyncio.run(delete_topics(Settings.from_env()))
') || echo "wheel check: could not delete the topics of namespace $namespace" >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # exit runs the EXIT trap

# Built from a copy of the files git would see: setuptools builds in the source tree,
# and a build/ left there keeps modules since removed, which would end up in the wheel.
step "copy the sources to $tmp/src"
mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' file; do [[ -f "$file" ]] && printf '%s\0' "$file"; done \
  | tar --null -T - -cf - | tar -xf - -C "$tmp/src"

step "build the wheel (pip wheel --no-deps)"
"$python" -m pip wheel -q --no-deps --disable-pip-version-check -w "$tmp/dist" "$tmp/src"
wheels=("$tmp"/dist/kafkron-*.whl)
[[ -f "${wheels[0]}" ]] || fail "pip wheel made no kafkron wheel"
echo "built $(basename "${wheels[0]}")"

step "install it into a fresh virtualenv"
"$python" -m venv "$venv"
"$bin/python" -m pip install -q --disable-pip-version-check "${wheels[0]}"

# From here on: outside the checkout, with nothing of it on the import path.
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
unset PYTHONPATH
installed="$("$bin/python" -c 'import actors; print(actors.__file__)')"
[[ "$installed" == "$venv"/* ]] || fail "actors imported from $installed, not the wheel"
[[ "$installed" != "$checkout"/* ]] || fail "actors imported from the checkout"

step "kafkron simulate --list"
"$bin/kafkron" simulate --list >"$tmp/list.txt" 2>&1 \
  || fail "simulate --list failed: $(tail -n 5 "$tmp/list.txt")"
grep -q '^midnight-reboot  *The billing world' "$tmp/list.txt" \
  || fail "simulate --list does not describe midnight-reboot: $(cat "$tmp/list.txt")"

step "kafkron simulate midnight-reboot --seed 1"
"$bin/kafkron" simulate midnight-reboot --seed 1 >"$tmp/story.txt" 2>&1 \
  || fail "simulate midnight-reboot failed: $(tail -n 5 "$tmp/story.txt")"
grep -q 'verdict: every invariant held (seed 1)' "$tmp/story.txt" \
  || fail "simulate midnight-reboot: no verdict; $(tail -n 5 "$tmp/story.txt")"

step "kafkron next"
next="$("$bin/kafkron" next '30 2 * * *' --tz America/New_York --from 2026-03-07T00:00:00Z -n 2)"
[[ "$next" == $'2026-03-07T07:30:00.000Z\n2026-03-08T07:00:00.000Z' ]] \
  || fail "kafkron next printed: $next"

step "kafkron web's first page (namespace $namespace on ${KAFKRON_BOOTSTRAP:-the local broker})"
export KAFKRON_NAMESPACE="$namespace"
topics_made=true
"$bin/kafkron" topics create --partitions 1 >/dev/null
port="$("$bin/python" -c '
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
')"
"$bin/kafkron" web --port "$port" --db "$tmp/history.db" >"$tmp/web.log" 2>&1 &
web_pid=$!
# Polled: the console takes a moment to listen, and the first page reads the topic.
"$bin/python" - "$port" "$namespace" <<'EOF' || fail "the console's first page: $(tail -n 20 "$tmp/web.log")"
import sys
import time
import urllib.error
import urllib.request

port, namespace = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=20) as page:
            status, text = page.status, page.read().decode()
        break
    except urllib.error.HTTPError as error:
        sys.exit(f"GET / answered {error.code}")
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("the console did not answer within 60 s")
        time.sleep(0.2)
title = f"<title>Schedules · {namespace}</title>"
if status != 200 or title not in text or "No schedules yet" not in text:
    sys.exit(f"GET / answered {status} without {title!r}: {text[:300]!r}")
print(f"GET / answered {status}: {title}")
EOF

step "the README's From Python program (100 one-offs), with a scheduler and a worker"
# The first Python block of the README's "From Python" section, as a user copies it.
"$bin/python" - "$checkout/README.md" "$tmp/from_python.py" <<'EOF' || fail "no program"
import re
import sys

readme = open(sys.argv[1], encoding="utf-8").read()
section = readme.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
open(sys.argv[2], "w", encoding="utf-8").write(blocks[0])
EOF
export KAFKRON_BILLING_DB="$tmp/billing.db"
"$bin/kafkron" scheduler --session-timeout-ms 6000 --heartbeat-ms 1000 >"$tmp/scheduler.log" 2>&1 &
actor_pids+=($!)
"$bin/kafkron" worker --jobs actors.examples.billing.jobs >"$tmp/worker.log" 2>&1 &
actor_pids+=($!)
timeout 400 "$bin/python" "$tmp/from_python.py" >"$tmp/program.txt" 2>&1 \
  || fail "the program failed: $(tail -n 20 "$tmp/program.txt"; tail -n 20 "$tmp/worker.log")"
runs="$(grep -cE '^[^ ]+@[^ ]+ (succeeded|failed)$' "$tmp/program.txt" || true)"
[[ "$runs" == 100 ]] || fail "the program reported $runs runs, not 100: $(head -n 5 "$tmp/program.txt")"
echo "the program reported 100 runs, $(grep -c ' succeeded$' "$tmp/program.txt") succeeded"

step "passed"
