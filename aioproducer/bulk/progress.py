"""How far a bulk call got: what a caller needs to retry it when it stops part way.

``enqueue_many`` appends a call's records in call order, slice by slice, and
waits (for buffer memory, metadata, a turn of the event loop) only between
slices, so at every point where it can be cancelled the records already
buffered are a prefix of the call: records ``0 .. buffered - 1``. They stay
buffered and are delivered; the call's future reports them (and fails the rest
with :class:`~aioproducer.errors.CallCancelledError`). A retry sends
``values[buffered:]`` and duplicates nothing.

A :class:`BulkProgress` says how far the call got. The caller may pass one in
(``progress=``), which survives whatever asyncio does with the exception
(``asyncio.timeout``, ``wait_for``, a TaskGroup, ``task.cancel()``); the
``CancelledError`` a bulk call raises also carries its progress as
``bulk_progress``, found through a ``TimeoutError``'s cause by :meth:`BulkProgress.of`.
The error stays a plain ``CancelledError``: asyncio's ``timeout()`` and
TaskGroup test for exactly that class (Python 3.11), so a subclass would
break them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import BulkResult

__all__ = ["BulkProgress"]

#: The attribute of a bulk call's ``CancelledError`` that holds its progress.
ATTRIBUTE = "bulk_progress"


def _retrieve(future: asyncio.Future[BulkResult]) -> None:
    """Mark the outcome as seen: a cancelled caller was offered it, not made to take it."""
    if not future.cancelled():
        future.exception()


class BulkProgress:
    """How far one bulk call (``enqueue_many``/``send_many``) got.

    ``buffered``: records ``0 .. buffered - 1`` of the call are buffered (a
    prefix: records go in in call order) and will be delivered or fail on
    their own; the rest were never buffered. ``future``: the call's future
    once it has one (a record is buffered, or the call returned), else None;
    it resolves exactly once, when the buffered records have all reported, to
    a :class:`~aioproducer.BulkResult` or a :class:`~aioproducer.BulkSendError`
    (whose ``result.errors[None]`` lists the records never buffered).

    One object records one call: passing it to a second call raises ValueError.
    """

    __slots__ = ("_used", "buffered", "future")

    def __init__(self) -> None:
        self.buffered = 0
        self.future: asyncio.Future[BulkResult] | None = None
        self._used = False

    def __repr__(self) -> str:
        state = "no future" if self.future is None else "done" if self.future.done() else "pending"
        return f"<BulkProgress buffered={self.buffered} {state}>"

    @staticmethod
    def of(exc: BaseException) -> BulkProgress | None:
        """The progress a bulk call's ``CancelledError`` carries, looked for in
        ``exc`` and its causes (``asyncio.timeout`` raises ``TimeoutError``
        from the ``CancelledError``); None if there is none."""
        seen: set[int] = set()
        cur: BaseException | None = exc
        while cur is not None and id(cur) not in seen:
            seen.add(id(cur))
            progress = getattr(cur, ATTRIBUTE, None)
            if isinstance(progress, BulkProgress):
                return progress
            cur = cur.__cause__ or cur.__context__
        return None

    def claim(self) -> None:
        """Start recording a call; raises ValueError if this object recorded one already."""
        if self._used:
            raise ValueError(
                "this BulkProgress already records a bulk call; pass a new one to each call"
            )
        self._used = True

    def attach(self, exc: BaseException) -> None:
        """Hand this progress out with ``exc`` (the call's ``CancelledError``).

        The call's outcome then counts as seen, so a caller that does not ask
        for it gets no "exception was never retrieved" log.
        """
        setattr(exc, ATTRIBUTE, self)
        if self.future is not None:
            self.future.add_done_callback(_retrieve)
