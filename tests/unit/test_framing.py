"""FrameDecoder: small frames through its buffer, large ones received in place."""

from __future__ import annotations

import os
import struct

import pytest

from spool.protocol.framing import FrameDecoder, FrameError, frame_buffer


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def drain(dec: FrameDecoder) -> list[bytearray]:
    out = []
    while (f := dec.take_frame()) is not None:
        out.append(f)
    return out


def receive(dec: FrameDecoder, data: bytes, threshold: int, step: int) -> list[bytearray]:
    """Deliver ``data`` as the server does (at most ``step`` bytes a receive, frames taken
    after each); the frames that came out."""
    frames: list[bytearray] = []
    pos = 0
    while pos < len(data):
        target = dec.receive_target(threshold) if dec.buffered else None
        if target is None:
            chunk = data[pos:pos + step]
            dec.feed(chunk)
        else:
            chunk = data[pos:pos + min(step, len(target))]
            target[:len(chunk)] = chunk
            target.release()
            dec.received(len(chunk))
        pos += len(chunk)
        frames += drain(dec)
    return frames


@pytest.mark.parametrize("step", [997, 70_000, 10 << 20])
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(step):
    payloads = [b"a" * 10, os.urandom(300_000), b"", os.urandom(65_537), b"z" * 5,
                os.urandom(1 << 20)]
    data = b"".join(framed(p) for p in payloads)
    dec = FrameDecoder()
    got = receive(dec, data, 64 * 1024, step)
    assert [bytes(f) for f in got] == payloads
    assert all(type(f) is bytearray for f in got)
    assert dec.buffered == 0 and dec.pending_size() is None


def test_a_large_frame_is_received_in_its_own_buffer_counted_at_its_declared_size():
    payload = os.urandom(200_000)
    dec = FrameDecoder()
    dec.feed(framed(payload)[:1000])
    assert dec.pending_size() == 200_000 and dec.buffered == 1000
    target = dec.receive_target(64 * 1024)
    assert target is not None and len(target) == 200_000 - 996
    assert dec.pending_size() == 200_000 and dec.buffered == 1000
    target[:] = payload[996:]
    target.release()
    assert dec.take_frame() is None  # not counted yet
    dec.received(200_000 - 996)
    assert dec.buffered == 200_004
    frame = dec.take_frame()
    assert frame == payload
    frame += b"x"  # a plain bytearray: no view of it is left behind
    assert dec.buffered == 0 and dec.take_frame() is None


def test_small_whole_or_oversized_frames_are_not_received_in_place():
    dec = FrameDecoder(max_size=100_000)
    dec.feed(framed(b"x" * 70_000)[:10])
    assert dec.receive_target(80_000) is None  # not larger than the threshold
    dec = FrameDecoder(max_size=100_000)
    dec.feed(framed(b"x" * 70_000))
    assert dec.receive_target(64 * 1024) is None  # whole already
    assert dec.take_frame() == b"x" * 70_000
    dec.feed(struct.pack(">i", 100_001) + b"y" * 10)
    assert dec.receive_target(64 * 1024) is None
    with pytest.raises(FrameError, match="exceeds the limit of 100000"):
        dec.take_frame()
    dec = FrameDecoder()
    dec.feed(struct.pack(">i", -5))
    assert dec.receive_target(0) is None
    with pytest.raises(FrameError, match="negative frame size -5"):
        dec.take_frame()


def test_frame_buffer_has_the_size_asked_for():
    for size in (0, 1, 65_537, 5 << 20):
        buf = frame_buffer(size)
        assert type(buf) is bytearray and len(buf) == size
