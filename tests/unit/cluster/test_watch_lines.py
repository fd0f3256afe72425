"""The watch stream's line splitter (``informer.Lines``): the same events however the
stream is cut into reads, and a long event held as its reads until it ends."""

from __future__ import annotations

import orjson
import pytest

from kubesched.cluster.informer import Lines


def event(name: str, note: str = "") -> bytes:
    obj = {"kind": "Pod", "metadata": {"name": name, "annotations": {"note": note}}}
    return orjson.dumps({"type": "ADDED", "object": obj})


STREAM = event("a") + b"\n" + event("b", "x" * 300) + b"\n\n" + event("c") + b"\n"
"""Three events, with an empty line between two (skipped, as before)."""
WHOLE = [event("a"), event("b", "x" * 300), event("c")]


def fed(reads: list[bytes]) -> list[bytes]:
    lines = Lines()
    out: list[bytes] = []
    for r in reads:
        out += lines.feed(r)
    assert lines.pending() == []  # the stream ended on a newline: nothing left over
    return out


def test_every_cut_in_two_reads_gives_the_events_whole() -> None:
    for i in range(len(STREAM) + 1):
        assert fed([STREAM[:i], STREAM[i:]]) == WHOLE, i


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_small_reads_give_the_events_whole(size: int) -> None:
    reads = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert fed(reads) == WHOLE


def test_reads_of_several_events_each() -> None:
    assert fed([STREAM]) == WHOLE
    assert fed([STREAM, b"", STREAM]) == WHOLE + WHOLE


def test_an_unfinished_line_is_not_delivered() -> None:
    lines = Lines()
    assert lines.feed(event("a") + b"\n" + event("b")[:10]) == [event("a")]
    assert lines.pending() == [event("b")[:10]]
    assert lines.feed(event("b")[10:] + b"\n") == [event("b")]
    assert lines.pending() == []


def test_a_long_event_is_kept_as_its_reads_and_joined_once() -> None:
    big = event("big", "y" * (4 << 20))  # 4 MB: a read of 64 KiB carries 1/64 of it
    stream = big + b"\n" + event("next") + b"\n"
    read = 64 << 10
    lines = Lines()
    out: list[bytes] = []
    for i in range(0, len(stream), read):
        chunk = stream[i : i + read]
        out += lines.feed(chunk)
        held = lines.pending()
        # before its end the event is held as the reads it came in, not a growing copy
        assert all(len(piece) <= read for piece in held)
        if not out:
            assert sum(map(len, held)) == i + len(chunk)
    assert out == [big, event("next")]
    assert lines.pending() == []
