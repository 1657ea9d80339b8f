"""When the sender loop makes its next pass: at once when rung, else at its timer.

The loop sleeps on a bare future with a timer, not on ``Event.wait()`` under
``wait_for``, which would create a task on every pass. :class:`SenderAlarm`
owns that future and that timer, and knows when the timer fires, so that the
sender can leave a sleeping loop alone when it will look in time anyway, or
bring its timer forward rather than ring it for a pass that would only set
the same timer (see ``Sender.batch_opened``).
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["SenderAlarm"]


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class SenderAlarm:
    """The sender loop's wakeups and its timer; the loop's only owner of both."""

    __slots__ = ("asleep_until", "timer", "waiter", "woken")

    def __init__(self) -> None:
        #: Rung since the loop's last pass began: it passes again without sleeping.
        self.woken = False
        #: While the loop sleeps: the future it awaits, its timer, and when
        #: (``time.monotonic()``, the clock of ``ProducerBatch.created``) the timer fires.
        self.waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.asleep_until: float | None = None

    def ring(self) -> None:
        """Make the loop pass again at once (wake it if it sleeps)."""
        self.woken = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds, or less when rung or brought forward."""
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        # Give or take the loop's own timer granularity (uvloop's clock is a
        # cached, millisecond reading of the same monotonic clock).
        self.asleep_until = time.monotonic() + delay
        self.timer = loop.call_later(delay, _release, waiter)
        try:
            await waiter
        finally:
            self.timer.cancel()  # bring_forward may have replaced it
            self.timer = None
            self.waiter = None
            self.asleep_until = None

    def bring_forward(self, when: float, now: float) -> None:
        """Move the sleeping loop's timer to ``when`` (a ``time.monotonic()`` reading
        after ``now``, before ``asleep_until``)."""
        waiter, timer = self.waiter, self.timer
        assert waiter is not None and timer is not None, "the loop is not asleep"
        timer.cancel()
        self.timer = waiter.get_loop().call_later(when - now, _release, waiter)
        self.asleep_until = when
