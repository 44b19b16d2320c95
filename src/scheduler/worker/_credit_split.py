"""Credit split by demand: how a worker with one stream per node shares its free slots.

Pure bookkeeping, no I/O (the multi-stream layer sends what it answers). The rules
(docs/cluster.md, "How workers reach shards"):

1. Never more credit granted in total than free slots: a push may always be run.
2. At least one credit on every stream while there are slots for it, so every node
   can always reach this worker (a node with nothing waiting costs one slot at most).
3. Each other free slot goes to the stream whose node reported the most waiting work
   (its ``Backlog``) not already covered by the credit it holds; on a tie to the
   stream holding the least credit, then the stream opened first.
4. What no backlog asks for goes, the same way, only to streams whose node does not
   report backlogs (an older server: ``open(reports=False)``), so without backlogs
   the slots are spread evenly. A node that reports its backlog (``reports=True``)
   gets one credit while it has nothing waiting: the rest stays unallocated, held in
   reserve for whichever node reports work next. Credit given to an idle node could
   not be taken back, and would sit idle while another node's work waits.

Credit once granted cannot be taken back (the wire has no revoke), so a node that
dies or freezes holds only what was granted to it; closing its stream returns that
credit to the pool, and it is given out again at once.

May call: nothing. Called by: the multi-stream layer and its unit tests.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class _Share:
    granted: int = 0
    """Credit this stream's node holds: granted and not yet used by a push."""
    waiting: int = 0
    """Its node's last reported backlog for this worker."""
    order: int = 0
    reports: bool = False
    """Its node sends backlogs: no credit beyond one unless it reports work."""


class CreditSplit:
    """The credit each stream holds out of ``capacity`` slots (see the module docstring).

    Every method that changes the split answers the new grants as ``{stream: credit}``
    (only streams that get more; send each as a ``Credit`` message, or in ``Hello``
    for a stream that is opening)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._busy = 0  # slots taken by held tasks
        self._shares: dict[str, _Share] = {}
        self._opened = 0

    # -- reading ----------------------------------------------------------------------

    def granted(self, stream: str) -> int:
        """Credit ``stream`` holds now (0 for an unknown stream)."""
        share = self._shares.get(stream)
        return share.granted if share is not None else 0

    def total_granted(self) -> int:
        """Credit held by every stream together (never more than :meth:`free`)."""
        return sum(s.granted for s in self._shares.values())

    def free(self) -> int:
        """Slots not taken by a held task."""
        return self.capacity - self._busy

    def streams(self) -> list[str]:
        """The open streams, oldest first."""
        return sorted(self._shares, key=lambda k: self._shares[k].order)

    # -- changes ----------------------------------------------------------------------

    def open(self, stream: str, *, reports: bool = False) -> dict[str, int]:
        """A stream is opening: it joins the split (its grant goes in its ``Hello``).
        ``reports``: its node sends backlogs (rule 4)."""
        if stream not in self._shares:
            self._opened += 1
            self._shares[stream] = _Share(order=self._opened)
        self._shares[stream].reports = reports
        return self._fill()

    def close(self, stream: str) -> dict[str, int]:
        """A stream ended: the credit it held comes back and is given out again. Tasks
        it pushed stay held until :meth:`finished`."""
        self._shares.pop(stream, None)
        return self._fill()

    def pushed(self, stream: str, tasks: int = 1) -> None:
        """``stream``'s node pushed ``tasks``: each used one credit and takes a slot."""
        share = self._shares.get(stream)
        if share is not None:
            used = min(tasks, share.granted)
            share.granted -= used
            share.waiting = max(0, share.waiting - tasks)
        self._busy = min(self.capacity, self._busy + tasks)

    def finished(self, tasks: int = 1) -> dict[str, int]:
        """``tasks`` handlers ended: their slots are free and go out by demand."""
        self._busy = max(0, self._busy - tasks)
        return self._fill()

    def backlog(self, stream: str, waiting: int) -> dict[str, int]:
        """``stream``'s node reports ``waiting`` tasks for this worker."""
        share = self._shares.get(stream)
        if share is not None:
            share.waiting = max(0, waiting)
        return self._fill()

    # -- the rule ---------------------------------------------------------------------

    def _fill(self) -> dict[str, int]:
        spare = self.free() - self.total_granted()
        grants: dict[str, int] = {}
        if spare <= 0 or not self._shares:
            return grants
        ordered = self.streams()
        # Rule 2: one credit for every stream that holds none (oldest first).
        for name in ordered:
            if spare == 0:
                return grants
            share = self._shares[name]
            if share.granted == 0:
                share.granted = 1
                grants[name] = 1
                spare -= 1
        # Rules 3 and 4: the rest one slot at a time to the largest uncovered backlog;
        # beyond the backlogs, only to streams whose node reports none. A run of slots
        # that would all go to the same stream one at a time goes at once: as many as
        # keep its backlog uncovered by more than the next stream's (and no more than
        # its backlog), so the split is that of one slot at a time, in fewer steps.
        while spare > 0:
            takers = sorted(
                (
                    (-(share.waiting - share.granted), share.granted, share.order, k)
                    for k in ordered
                    if not (share := self._shares[k]).reports or share.waiting > share.granted
                ),
            )
            if not takers:
                return grants
            first, name = takers[0][0], takers[0][3]
            share = self._shares[name]
            run = spare
            if share.reports:
                run = min(run, -first)
            if len(takers) > 1:
                run = min(run, max(1, takers[1][0] - first))
            share.granted += run
            grants[name] = grants.get(name, 0) + run
            spare -= run
        return grants
