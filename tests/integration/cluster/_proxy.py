"""A TCP proxy that can cut one client off a server (a network partition), asyncio only."""

from __future__ import annotations

import asyncio
import contextlib


class PartitionProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; :meth:`cut` drops every byte both ways
    (connections stay open, as in a partition), :meth:`heal` resets them and forwards
    again."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()
        self.cut_off = False
        self.port = 0

    @property
    def endpoint(self) -> str:
        """``host:port`` clients connect to."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        self.cut_off = True

    def heal(self) -> None:
        self.cut_off = False
        for w in list(self._writers):
            w.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._pumps):
            t.cancel()
        if self._pumps:
            await asyncio.wait(set(self._pumps))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump(src, dst), name="test-proxy-pump")
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                if not self.cut_off:
                    dst.write(data)
                    await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(dst)
            dst.close()
            with contextlib.suppress(OSError, RuntimeError):
                await dst.wait_closed()
