"""An exit whose result cannot be encoded still finishes its offset.

A job's text can hold a lone surrogate (a file name from ``os.listdir`` that is not
UTF-8, decoded with ``surrogateescape``), which JSON cannot carry. Such an exit must
neither be lost (its offset never finished, the partition's commit stuck for good)
nor keep its slot: the message is escaped where it is made (`error_of`, a cancel's
reason), and the core writes a fixed result in place of any it cannot encode
(docs/DESIGN.md §8.3).
"""

from __future__ import annotations

import orjson

from actors.worker.core import UNENCODABLE_ERROR, Outcome
from actors.worker.errors import error_of
from tests.worker.test_worker_core import T0, make_core, results_of, run_record

NAME = b"report-\xff.csv".decode("utf-8", "surrogateescape")


def test_an_error_whose_message_holds_a_lone_surrogate_is_escaped() -> None:
    error = error_of(ValueError(f"cannot parse {NAME}"))
    assert error == {"type": "ValueError", "message": "cannot parse report-\\udcff.csv"}
    orjson.dumps(error)  # raises on the old code: surrogates not allowed


def test_an_unencodable_exit_finishes_its_offset_with_a_fixed_failed_result() -> None:
    core = make_core(concurrency=2)
    core.receive(run_record(0), T0)
    core.receive(run_record(1), T0)
    raw = Outcome("failed", {"type": "ValueError", "message": f"cannot parse {NAME}"})
    core.jobs_exited([((0, 0, 0), raw), ((0, 1, 0), Outcome("succeeded"))], T0 + 5)
    assert core.running == 0
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 2
    first, second = results_of(commit)
    assert (first.schedule_id, first.status, first.error) == ("s0", "failed", UNENCODABLE_ERROR)
    assert (second.schedule_id, second.status) == ("s1", "succeeded")
    assert core.counts["unencodable"] == 1


def test_an_unencodable_cancelled_exit_stays_cancelled() -> None:
    core = make_core(concurrency=1)
    core.receive(run_record(0), T0)
    raw = Outcome("cancelled", {"type": "RunCancelled", "message": NAME})
    core.job_exited((0, 0, 0), raw, T0 + 5)
    [result] = results_of(core.take_commit(0))
    assert (result.status, result.error) == ("cancelled", UNENCODABLE_ERROR)
    assert core.running == 0
