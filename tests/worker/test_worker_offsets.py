"""The offset tracker: what a worker commits, and what a restored owner runs again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.worker.offsets import PartitionOffsets, decode_metadata


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    """(committed start, delivered offsets ascending with gaps, finish order of a subset)."""
    start = draw(st.integers(0, 1_000))
    gaps = draw(st.lists(st.integers(1, 3), min_size=0, max_size=60))
    offsets = []
    at = start
    for gap in gaps:
        offsets.append(at)
        at += gap  # gaps stand for transaction markers and aborted records
    finished = draw(st.lists(st.sampled_from(offsets), unique=True) if offsets else st.just([]))
    return start, offsets, finished


def _drive(tracker: PartitionOffsets, offsets: list[int], finished: list[int]) -> None:
    for offset in offsets:
        assert tracker.deliver(offset)
    for offset in finished:
        before = tracker.commit_offset()
        tracker.finish(offset)
        after = tracker.commit_offset()
        assert after >= before


@given(deliveries())
def test_commit_offset_is_lowest_unfinished_or_end(case: tuple[int, list[int], list[int]]) -> None:
    start, offsets, finished = case
    tracker = PartitionOffsets(start)
    _drive(tracker, offsets, finished)
    unfinished = sorted(set(offsets) - set(finished))
    expected = unfinished[0] if unfinished else (offsets[-1] + 1 if offsets else start)
    assert tracker.commit_offset() == expected
    assert tracker.open_offsets() == unfinished
    assert tracker.open_count() == len(unfinished)
    # Nothing delivered below the commit offset is unfinished.
    assert all(o in finished for o in offsets if o < tracker.commit_offset())


@given(deliveries(), st.integers(0, 5))
def test_restore_reruns_exactly_the_unfinished(
    case: tuple[int, list[int], list[int]], extra: int
) -> None:
    """A new owner restored from (offset, metadata) runs the open ones and new ones only."""
    start, offsets, finished = case
    tracker = PartitionOffsets(start)
    _drive(tracker, offsets, finished)
    committed, metadata = tracker.commit_offset(), tracker.metadata()

    restored = PartitionOffsets(committed, metadata)
    end = offsets[-1] + 1 if offsets else start
    new = list(range(end, end + extra))
    redelivered = [o for o in offsets if o >= committed] + new
    ran = [o for o in redelivered if restored.deliver(o)]
    assert ran == sorted(set(offsets) - set(finished)) + new
    # The restored owner commits nothing it has not finished.
    assert restored.commit_offset() == (ran[0] if ran else max(end, committed))


@given(deliveries(), st.data())
def test_two_generations_of_crashes(
    case: tuple[int, list[int], list[int]], data: st.DataObject
) -> None:
    start, offsets, finished = case
    first = PartitionOffsets(start)
    _drive(first, offsets, finished)
    second = PartitionOffsets(first.commit_offset(), first.metadata())
    ran = [o for o in offsets if o >= first.commit_offset() and second.deliver(o)]
    more = data.draw(st.lists(st.sampled_from(ran), unique=True) if ran else st.just([]))
    for offset in more:
        second.finish(offset)
    # A restored-but-unseen state must survive another hand-over unchanged.
    third = PartitionOffsets(second.commit_offset(), second.metadata())
    again = [o for o in offsets if o >= second.commit_offset() and third.deliver(o)]
    assert again == sorted(set(ran) - set(more))


def test_metadata_is_relative_and_short() -> None:
    tracker = PartitionOffsets(1_000_000_000)
    for offset in range(1_000_000_000, 1_000_000_000 + 10_000, 2):
        tracker.deliver(offset)
    for offset in range(1_000_000_002, 1_000_000_000 + 10_000, 2):
        tracker.finish(offset)  # a long job at the head, everything behind it done
    assert tracker.commit_offset() == 1_000_000_000
    assert tracker.metadata() == "k1 9999"
    assert decode_metadata(1_000_000_000, "k1 9999") == (1_000_009_999, [1_000_000_000])


def test_open_offset_the_log_no_longer_has_is_given_up() -> None:
    restored = PartitionOffsets(10, "k1 6 3")  # 10 and 13 open, end 16
    assert restored.fetch_from() == 10
    assert not restored.deliver(11)  # 10 vanished (retention): given up, 11 was finished
    assert restored.deliver(13)
    assert restored.commit_offset() == 13
    assert not restored.deliver(15)
    assert restored.deliver(16)


def test_unknown_metadata_means_run_everything_from_committed() -> None:
    for metadata in (None, "", "other tool", "k1 x", "k1 -1", "k1 5 9", "k1 5 0"):
        tracker = PartitionOffsets(7, metadata)
        assert tracker.deliver(7)
        assert tracker.deliver(8)


def test_redelivery_after_seek_is_ignored_and_finish_is_idempotent() -> None:
    tracker = PartitionOffsets(0)
    assert tracker.deliver(0) and tracker.deliver(2)
    assert not tracker.deliver(0)
    tracker.finish(2)
    tracker.finish(2)
    tracker.finish(99)
    assert tracker.commit_offset() == 0
    tracker.finish(0)
    assert tracker.commit_offset() == 3
    assert tracker.metadata() == "k1 0"
    tracker.mark_committed(3)
    assert tracker.committed == 3


@settings(max_examples=50)
@given(st.integers(0, 10**12))
def test_fresh_tracker_commits_where_it_started(committed: int) -> None:
    tracker = PartitionOffsets(committed)
    assert tracker.commit_offset() == committed == tracker.fetch_from()
    assert decode_metadata(committed, tracker.metadata()) == (committed, [])
