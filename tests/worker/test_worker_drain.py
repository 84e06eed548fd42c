"""A worker's drain (SIGTERM): its running jobs finish, no queued run starts.

Queued runs stay open in the partition's commits, so the next owner runs them;
starting them while draining would hold the stop up for runs another worker can
start at once.
"""

from __future__ import annotations

from actors.worker.core import Outcome, StartJob
from actors.worker.membership import Pause, Write
from tests.worker.test_worker_core import T0, results_of, run_record
from tests.worker.test_worker_membership import adopt, make_machine, of


def test_a_draining_worker_finishes_its_running_jobs_and_starts_no_queued_run() -> None:
    m = make_machine(concurrency=1)
    m.assigned([0], T0, rejoined=False)
    adopt(m, 0)
    [first] = of(m.records([run_record(0), run_record(1)], T0), StartJob)
    assert Pause(0) in m.stop(T0 + 10)
    actions = m.job_exited(first.key, Outcome("succeeded"), T0 + 20)
    assert of(actions, StartJob) == []
    actions += m.tick(T0 + 30)
    assert of(actions, StartJob) == []
    assert not m.core.drained()  # its result is not committed yet
    [write] = of(actions, Write)
    # The first run's result commits; the queued one stays open for the next owner.
    [result] = results_of(write.commit)
    assert result.schedule_id == "s0"
    assert write.commit.offset == 1
    m.commit_done(write.commit, T0 + 40)
    assert m.core.drained()  # what the drain waits for
    assert not m.core.idle()  # the queued run, left to the next owner
