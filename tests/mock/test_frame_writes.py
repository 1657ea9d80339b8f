"""A frame written as buffers reaches the peer whole, and the transport's flow control sees it.

Produce requests go to the transport as a list of buffers (the batches by
reference). Whatever the Python version, the bytes must arrive in order and a
full transport must pause its protocol, so that ``drain()`` waits: on CPython
3.12.0-3.12.8 and 3.13.0-3.13.1 ``writelines`` never paused (gh-127655), and
``write_frame`` joins there instead.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer.net.connection import write_frame

HIGH_WATER = 64 * 1024
MIB = 1 << 20


@pytest.mark.asyncio
async def test_a_frame_in_buffers_arrives_whole_and_a_full_transport_makes_drain_wait() -> None:
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
        asyncio.get_running_loop().create_future()
    )

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result((reader, writer))

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    peer_reader, peer_writer = await asyncio.wait_for(accepted, 10)
    try:
        writer.transport.set_write_buffer_limits(high=HIGH_WATER)
        sent = []
        # The peer reads nothing: the kernel's socket buffers fill (a few MiB on
        # loopback), then the transport's own buffer grows past its high-water mark.
        for i in range(256):
            if writer.transport.get_write_buffer_size() > HIGH_WATER:
                break
            chunks = [b"frame %d:" % i, bytes([i]) * MIB, bytearray(b"end")]
            write_frame(writer, chunks)
            sent.append(b"".join(chunks))
            await asyncio.sleep(0)
        assert writer.transport.get_write_buffer_size() > HIGH_WATER

        drained = asyncio.ensure_future(writer.drain())
        for _ in range(5):
            await asyncio.sleep(0)
        # Paused: a protocol that was never paused returns from drain() at once.
        assert not drained.done()

        expected = b"".join(sent)
        got = await asyncio.wait_for(peer_reader.readexactly(len(expected)), 60)
        assert got == expected
        await asyncio.wait_for(drained, 30)  # the peer read everything: writing resumes
    finally:
        writer.close()
        peer_writer.close()
        server.close()
        await server.wait_closed()
