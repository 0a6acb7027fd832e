"""``railgang api --workers N``'s shared listening socket: a TCP socket, so that asyncio turns
Nagle off on each accepted connection (uvicorn's own socket has proto 0 and every answer waited
~40 ms for the client's delayed ACK)."""

from __future__ import annotations

import asyncio
import socket

from railgang.daemon.api.cli import tcp_socket


def test_accepted_connections_have_nagle_off() -> None:
    sock = tcp_socket("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP and sock.get_inheritable()
    seen: list[int] = []

    async def main() -> None:
        async def handle(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP,
                                                                  socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=sock)
        async with server:
            _, w = await asyncio.open_connection(*sock.getsockname()[:2])
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            w.close()

    asyncio.run(main())
    assert seen and seen[0] != 0
