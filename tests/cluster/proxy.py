"""A TCP proxy for one process's link to one backend, to partition one node at a time.

    proxy = Proxy(5432).start()       # forwards 127.0.0.1:<proxy.port> -> 127.0.0.1:5432
    proxy.drop()                      # silent: nothing gets through either way, sockets stay open
    proxy.heal()                      # forward again (what was held back is delivered, as TCP would)
    proxy.set_latency(0.3)            # every chunk, each way, 300 ms late
    proxy.cut()                       # RST every connection (SO_LINGER 0), and every new one until heal()

It runs its own event loop in a thread of the test process, like the http receiver, so a
test that blocks (a SIGTERM and its wait) does not stall the traffic it forwards.
A dropped link is modelled by not reading: the kernel buffers fill, the peer's writes and
reads wait, no error reaches either side, as when packets are dropped on the way. New
connections during a drop are accepted and held (a connect "succeeds", the handshake never
completes), as a SYN retransmitted into a black hole would look to a client with a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Coroutine
from typing import Any

_CHUNK = 65536


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER on, 0 s) instead of a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Proxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1", name: str = "proxy") -> None:
        self.target = (target_host, target_port)
        self.name = name
        self.port = 0
        self.mode = "forward"  # forward | drop | cut
        self.latency_s = 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy-{name}", daemon=True)
        self._server: asyncio.Server | None = None
        self._open: asyncio.Event | None = None  # set while forwarding
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- control (from any thread) ---

    def start(self) -> Proxy:
        self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    def drop(self) -> None:
        self._call(self._set_mode("drop"))

    def cut(self) -> None:
        self._call(self._set_mode("cut"))

    def heal(self) -> None:
        self._call(self._set_mode("forward"))

    def set_latency(self, seconds: float) -> None:
        self.latency_s = seconds  # read by the pumps at each chunk

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(5)

    # --- the loop's side ---

    async def _start(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for client, upstream in list(self._links):
            client.transport.abort()
            upstream.transport.abort()
        self._links.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _set_mode(self, mode: str) -> None:
        assert self._open is not None
        self.mode = mode
        if mode == "forward":
            self._open.set()
            return
        self._open.clear()
        if mode == "cut":
            for client, upstream in list(self._links):
                _reset(client)
                _reset(upstream)
            self._links.clear()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._open is not None
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # a connection held during a drop is cancelled by stop()
        try:
            if self.mode != "cut":
                await self._open.wait()  # a new connection during a drop is held, never refused
            if self.mode == "cut":
                _reset(writer)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _reset(writer)
                return
        except asyncio.CancelledError:  # stop(): not re-raised, asyncio's stream callback would log it
            writer.transport.abort()
            return
        finally:
            self._tasks.discard(task)
        link = (writer, up_writer)
        self._links.add(link)
        self._spawn(self._pump(reader, up_writer, link))
        self._spawn(self._pump(up_reader, writer, link))

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        """Copy one direction; chunks keep their order and each waits out the latency from when
        it was read (a queue, so latency delays but does not throttle)."""
        assert self._open is not None
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = self._loop.create_task(self._send(queue, writer))
        try:
            while True:
                await self._open.wait()
                data = await reader.read(_CHUNK)
                if not data:
                    break
                queue.put_nowait((time.monotonic() + self.latency_s, data))
            await queue.join()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await sender
            if link in self._links:  # the other side closed: close this side too (a FIN, not a reset)
                self._links.discard(link)
                for side in link:
                    side.close()

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
        assert self._open is not None
        while True:
            due, data = await queue.get()
            try:
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                await self._open.wait()  # read before a drop began: held back with the rest
                writer.write(data)
                await writer.drain()
            finally:
                queue.task_done()
