"""Step 1 of ``Producer.enqueue``: a record one of the lanes can take, taken in one call.

A record with a bytes value, and no partition, headers or timestamp, goes to
the unkeyed lane (:mod:`.unkeyed_lane`) without a key, or to the keyed lane
(:mod:`.keyed_lane`) with a bytes key. ``EnqueueShortcut.take`` hands it to its
lane when nothing else must be checked first:

* the caller runs on the producer's event loop (the cheap check of
  :mod:`aioproducer.producer.loop_binding`: the loop's ``_thread_id`` is this thread's);
* no yield to the loop is due (``countdown``: records until enqueue gives the
  sender and other tasks a turn; 0 once a record opened a batch while the
  sender has a pass due);
* the producer is started, open and not transactional (``plain``);
* for a key, the keyed lane exists (no custom partitioner, no serializers, no
  ``partitioner_ignore_keys``) and the topic was already checked.

It answers the record's handle, having counted the record down, or None with
nothing appended: ``enqueue`` then takes its full path, which decides (and
raises, where something is wrong).

This object holds the state it reads: ``loop_mark`` (set only by the
producer's ``LoopBinding``) and ``plain`` (set only by its ``Lifecycle``), and
the full path counts down ``countdown`` too. ``topics_seen`` is the producer's own
set (never a copy), which only the producer adds to.

:class:`EnqueueShortcutPy` is the reference. With the C kernels built,
:data:`EnqueueShortcut` is its compiled twin (``_shortcut.c``): the same steps
in one C call, calling the lanes' compiled appends directly for lanes of the
compiled types. tests/unit/test_shortcut.py runs both and proves they answer
alike and leave the same state.
"""

from __future__ import annotations

from threading import get_ident
from typing import TYPE_CHECKING, Any

from .._speedups import kernels

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from .keyed_lane import KeyedLanePy
    from .record_handle import RecordHandlePy
    from .unkeyed_lane import UnkeyedLanePy

__all__ = ["EnqueueShortcut", "EnqueueShortcutPy"]


class EnqueueShortcutPy:
    """What step 1 of ``enqueue`` reads, and the step itself (see the module docstring)."""

    __slots__ = ("countdown", "keyed_lane", "lane", "loop_mark", "plain", "topics_seen")

    def __init__(self, loop_mark: Any, countdown: int, topics_seen: AbstractSet[str]) -> None:
        #: ``loop_mark._thread_id == threading.get_ident()``: the caller is on the producer's loop.
        self.loop_mark = loop_mark
        #: Records until enqueue yields to the event loop.
        self.countdown = countdown
        #: Started, open and not transactional: a record needs no state check.
        self.plain = False
        self.topics_seen = topics_seen
        self.lane: UnkeyedLanePy | None = None
        self.keyed_lane: KeyedLanePy | None = None

    def take(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: Any,
        timestamp_ms: Any,
        headers: Any,
    ) -> RecordHandlePy | None:
        """The record's handle once a lane appended it; None with nothing appended."""
        if (
            self.loop_mark._thread_id != get_ident()
            or self.countdown <= 0
            or not self.plain
            or partition is not None
            or headers is not None
            or timestamp_ms is not None
            or type(value) is not bytes
        ):
            return None
        # Counted down before anything is appended: once a lane has appended
        # the record, nothing may fail before its future is returned. (So the
        # lanes must not set the countdown: their appends never open a batch,
        # which is what sets it to 0, on the full path.)
        left = self.countdown - 1
        if key is None:
            fut = self.lane.append(topic, value)  # type: ignore[union-attr]  # plain: lanes set
        elif type(key) is bytes and self.keyed_lane is not None and topic in self.topics_seen:
            fut = self.keyed_lane.append(topic, key, value)
        else:
            return None
        if fut is not None:
            self.countdown = left
        return fut


# The twin chosen once: the compiled step is a type of the kernels (_shortcut.c).
if TYPE_CHECKING:
    EnqueueShortcut = EnqueueShortcutPy
else:
    EnqueueShortcut = kernels.EnqueueShortcut if kernels is not None else EnqueueShortcutPy
