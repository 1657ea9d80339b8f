"""An event loop running in a thread of its own, for tests that use several loops at once.

``with LoopThread() as owner: owner.run(coro)`` runs ``coro`` on that loop and
waits for it (bounded), so a test can keep a MockCluster or a producer alive
on one loop while it calls from others (``asyncio.run`` in the test's thread).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A started event loop in a daemon thread; stopped and closed on exit."""

    def __init__(
        self, loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    ) -> None:
        self.loop = loop_factory()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            self.run(cancel_rest(), 10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coro`` on the thread's loop; its result, or a failure after ``timeout`` s."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Call ``fn()`` on the thread's loop (to read state its tasks change)."""

        async def call() -> T:
            return fn()

        return self.run(call(), timeout)

    def wait(self, aw: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
        """Await ``aw()`` on the thread's loop, bounded by ``timeout`` s there too."""

        async def bounded() -> T:
            return await asyncio.wait_for(aw(), timeout)

        return self.run(bounded(), timeout + 5)
