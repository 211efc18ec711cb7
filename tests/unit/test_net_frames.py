"""spool.net.frames over a real loopback socket: every frame exactly as sent, whatever the
chunking, small frames cut out of the staging buffer and large ones received into their
own; the peer's EOF, mid-frame or between frames, and a bad size end the reader as
``StreamReader.readexactly`` would. Under asyncio's loop and under uvloop (the broker's)."""

from __future__ import annotations

import asyncio
import random
import socket
import struct

import pytest
import uvloop

from spool.net.frames import LOWAT_MAX, STAGING, open_frame_connection
from spool.protocol.primitives import ProtocolDecodeError

pytestmark = pytest.mark.timeout(60)
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def frame(size: int, seed: int) -> bytes:
    body = random.Random(seed).randbytes(size)
    return struct.pack(">i", size) + body


async def serve(chunks: list[bytes], eof: bool = True):
    """A server that writes ``chunks`` one by one (a pause between them), then closes."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for c in chunks:
            writer.write(c)
            await writer.drain()
            await asyncio.sleep(0.001)
        if eof:
            writer.close()
        else:
            await asyncio.sleep(30)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        n = rng.choice((1, 3, 4, 5, 100, STAGING - 3, STAGING + 7, 300_000))
        out.append(data[pos:pos + n])
        pos += n
    return out


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("seed", range(3))
def test_every_frame_arrives_whole_whatever_the_chunking(loop_name: str, seed: int) -> None:
    rng = random.Random(seed)
    sizes = [4, 5, 100, STAGING - 4, STAGING - 3, STAGING, STAGING * 3 + 1, 1 << 20, 4, 17]
    rng.shuffle(sizes)
    frames = [frame(s, i) for i, s in enumerate(sizes)]

    async def main() -> None:
        server, port = await serve(cut(b"".join(frames), rng))
        async with server:
            reader, writer = await open_frame_connection("127.0.0.1", port, 2 << 20)
            got = [await reader.read_frame() for _ in frames]
            assert [bytes(g) for g in got] == [f[4:] for f in frames]
            with pytest.raises(asyncio.IncompleteReadError) as e:  # then the server's EOF
                await reader.read_frame()
            assert e.value.partial == b""
            writer.close()
            await writer.wait_closed()

    LOOPS[loop_name]().run_until_complete(main())


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_frame_past_the_low_water_cap_then_a_small_one(loop_name: str) -> None:
    """A large frame sets SO_RCVLOWAT (at most what it still lacks); its last bytes, fewer
    than the cap, and the small frame after it still wake the reader, and the mark is back
    to 1 between frames."""
    big, small = frame(LOWAT_MAX * 2 + 12_345, 1), frame(9, 2)
    chunks = [big[:STAGING + 1], big[STAGING + 1:LOWAT_MAX + 5], big[LOWAT_MAX + 5:-10],
              big[-10:], small]

    async def main() -> None:
        server, port = await serve(chunks)
        async with server:
            reader, writer = await open_frame_connection("127.0.0.1", port, 4 << 20)
            assert bytes(await reader.read_frame()) == big[4:]
            assert bytes(await reader.read_frame()) == small[4:]
            sock = writer.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
            writer.close()

    LOOPS[loop_name]().run_until_complete(main())


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("size", [100, 1 << 20])
def test_eof_inside_a_frame_is_an_incomplete_read(loop_name: str, size: int) -> None:
    whole = frame(size, 1)

    async def main() -> None:
        server, port = await serve([frame(10, 0), whole[:size // 2]])
        async with server:
            reader, writer = await open_frame_connection("127.0.0.1", port, 2 << 20)
            assert bytes(await reader.read_frame()) == frame(10, 0)[4:]
            with pytest.raises(asyncio.IncompleteReadError) as e:
                await reader.read_frame()
            assert len(e.value.partial) > 0
            writer.close()

    LOOPS[loop_name]().run_until_complete(main())


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("size", [3, -1, (2 << 20) + 1])
def test_a_size_out_of_range_is_a_decode_error(loop_name: str, size: int) -> None:
    async def main() -> None:
        server, port = await serve([frame(10, 0), struct.pack(">i", size) + b"x" * 8],
                                   eof=False)
        async with server:
            reader, writer = await open_frame_connection("127.0.0.1", port, 2 << 20)
            assert bytes(await reader.read_frame()) == frame(10, 0)[4:]
            with pytest.raises(ProtocolDecodeError, match=f"frame of {size} bytes"):
                await reader.read_frame()
            await asyncio.wait_for(writer.wait_closed(), 10)  # the reader closed it

    LOOPS[loop_name]().run_until_complete(main())


@pytest.mark.parametrize("loop_name", LOOPS)
def test_writes_drain_and_the_peer_reads_them(loop_name: str) -> None:
    """The StreamWriter side: what is written arrives; drain and wait_closed return."""
    async def main() -> None:
        got: list[bytes] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.append(await reader.readexactly(3 << 20))
            writer.write(frame(5, 0))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            reader, writer = await open_frame_connection("127.0.0.1", port, 1 << 20)
            data = random.Random(2).randbytes(3 << 20)
            writer.writelines([data[:1000], data[1000:]])
            await writer.drain()
            assert bytes(await reader.read_frame()) == frame(5, 0)[4:]
            writer.close()
            await writer.wait_closed()
        assert got == [data]

    LOOPS[loop_name]().run_until_complete(main())
