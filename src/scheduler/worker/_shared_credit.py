"""One pool of slots over a :class:`~scheduler.worker.ClusterWorker`'s member streams.

:class:`SharedCredit` holds the :class:`~scheduler.worker._credit_split.CreditSplit` of
the whole worker and sends what it decides: each member stream gets a
:class:`StreamCredit` handle that its :class:`~scheduler.worker.Worker` calls instead
of counting its own slots (the stream's ``Hello``, its welcome, each push, each
finished handler, each ``Backlog`` its node sends, the end of a stream attempt). The
grants the split answers go out as ``Credit`` on the streams that are up; a stream
between its ``Hello`` and its welcome gets what accrued meanwhile at the welcome.

So freed slots follow the nodes' backlogs: a node with all the waiting work gets every
slot but one per other stream, and when no node reports a backlog (an older server)
the slots spread evenly. Never more credit is out in total than free slots, so a push
can always run. A stream that ends (broken, or its node left) gives its unused credit
back to the pool at once: the server forgets a closed session's credit too.

May call: the credit split and the ``send`` of each member's stream. Called by: the
member workers (through their handles) and :class:`ClusterWorker`.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker._credit_split import CreditSplit

Send = Callable[[pb.WorkerMessage], None]


class SharedCredit:
    """The slots of one worker, shared by demand between its member streams."""

    def __init__(self, slots: int) -> None:
        self.split = CreditSplit(slots)
        self._senders: dict[str, Send] = {}
        self._current: dict[str, StreamCredit] = {}
        self._up: set[str] = set()
        self._asks: dict[str, bool] = {}
        self.backlogs = 0
        """Backlog reports heard so far (for tests and metrics)."""

    def handle(self, stream: str, send: Send, *, reports: bool = True) -> StreamCredit:
        """The handle of member ``stream`` (whose stream's ``send`` is given);
        ``reports``: its stream asks its node for backlogs."""
        self._senders[stream] = send
        self._asks[stream] = reports
        handle = self._current[stream] = StreamCredit(self, stream)
        return handle

    def _is_current(self, handle: StreamCredit) -> bool:
        # A member restarted under the same name (its address changed) leaves the old
        # worker draining: its stream's ends and pushes must not touch the new one's.
        return self._current.get(handle.stream) is handle

    def _grant(self, grants: dict[str, int]) -> None:
        for stream, slots in grants.items():
            if stream in self._up and slots > 0:
                self._senders[stream](pb.WorkerMessage(credit=pb.Credit(slots=slots)))

    # -- what the handles call ------------------------------------------------------

    def _hello(self, stream: str) -> int:
        # A new attempt is a new session on the server: whatever the last one held is
        # gone with it (closed()), and this one starts from its Hello.
        # Until its welcome says whether the node reports backlogs, a stream that asks
        # for them counts as one that does (one credit): an older server is topped up
        # to an even share then. One that does not ask gets its even share at once.
        self._up.discard(stream)
        self._grant(self.split.close(stream))
        self._grant(self.split.open(stream, reports=self._asks.get(stream, True)))
        return self.split.granted(stream)

    def _welcome(self, stream: str, announced: int, reports: bool) -> None:
        self._up.add(stream)
        grants = self.split.open(stream, reports=reports)
        self._grant({s: n for s, n in grants.items() if s != stream})
        extra = self.split.granted(stream) - announced
        if extra > 0:
            self._senders[stream](pb.WorkerMessage(credit=pb.Credit(slots=extra)))

    def _closed(self, stream: str) -> None:
        self._up.discard(stream)
        self._grant(self.split.close(stream))


class StreamCredit:
    """One member stream's view of the shared slots."""

    def __init__(self, shared: SharedCredit, stream: str) -> None:
        self._shared = shared
        self.stream = stream

    def hello(self) -> int:
        """A stream attempt opens: the credit to announce in its ``Hello``."""
        if not self._shared._is_current(self):
            return 0
        return self._shared._hello(self.stream)

    def welcome(self, announced: int, *, reports: bool) -> None:
        """The attempt was welcomed (``reports``: its node sends backlogs): send what
        accrued since the ``Hello``."""
        if self._shared._is_current(self):
            self._shared._welcome(self.stream, announced, reports)

    def closed(self) -> None:
        """The attempt ended (or the member drains): its unused credit goes back."""
        if self._shared._is_current(self):
            self._shared._closed(self.stream)

    def retire(self) -> None:
        """The member drains for good: it gives its credit back and is no longer the
        stream of its name (a new member of that name may start)."""
        self.closed()
        if self._shared._is_current(self):
            del self._shared._current[self.stream]

    def outstanding(self) -> int:
        """Credit the nodes hold now, every stream's together."""
        return self._shared.split.total_granted()

    def pushed(self, tasks: int) -> None:
        """The node pushed ``tasks``: each used a credit and takes a slot."""
        # A retired stream's pushes still take slots, but hold no share of the split.
        stream = self.stream if self._shared._is_current(self) else ""
        self._shared.split.pushed(stream, tasks)

    def finished(self, tasks: int = 1) -> None:
        """``tasks`` slots are free again (handlers ended, pushes given back)."""
        self._shared._grant(self._shared.split.finished(tasks))

    def backlog(self, waiting: int) -> None:
        """The node reports ``waiting`` tasks for this stream."""
        if not self._shared._is_current(self):
            return
        self._shared.backlogs += 1
        self._shared._grant(self._shared.split.backlog(self.stream, waiting))
