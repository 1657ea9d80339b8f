"""Scripted faults of the mock cluster: what to break, where, and how many times.

:class:`FaultPlan` only records faults and answers the server's questions
("should this response be delayed?", "is this request to fail?"); the server
and the handlers act on the answers. Every fault is deterministic: it fires on
the next matching requests, never at random, so a test can script a failure
and assert exactly what the client did about it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["FaultPlan", "InterceptHandler", "RequestContext"]


@dataclasses.dataclass(frozen=True)
class RequestContext:
    """What a handler or an intercept knows about the request besides its body."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# The request is an instance of the API's generated request class
# (``protocol/generated``); the answer one of its response class, or None to
# let the mock answer as usual.
InterceptResult = Any
InterceptHandler = Callable[[Any, RequestContext], InterceptResult | Awaitable[InterceptResult]]


@dataclasses.dataclass
class _Countdown:
    """A fault that fires ``remaining`` more times (None: until cleared)."""

    remaining: int | None

    def take(self) -> bool:
        if self.remaining is None:
            return True
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True

    @property
    def spent(self) -> bool:
        return self.remaining is not None and self.remaining <= 0


@dataclasses.dataclass
class _ApiFailure(_Countdown):
    api_key: int = 0
    error_code: int = 0
    broker: int | None = None


@dataclasses.dataclass
class _Delay(_Countdown):
    seconds: float = 0.0
    broker: int | None = None
    api_key: int | None = None


class FaultPlan:
    """The faults currently scripted on a cluster."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every fault (stalled brokers are resumed by the cluster)."""
        # (topic, partition) -> queue of [error code, remaining requests, after append (0/1)]
        self.produce_failures: dict[tuple[str, int], list[list[int]]] = {}
        self.api_failures: list[_ApiFailure] = []
        self.delays: list[_Delay] = []
        self.throttle_ms: dict[int, int] = {}
        # broker -> responses to let through before cutting one mid-frame
        self.cut_after: dict[int, int] = {}
        self.intercepts: dict[int, InterceptHandler] = {}

    def __repr__(self) -> str:
        return (
            f"FaultPlan(produce={len(self.produce_failures)}, apis={len(self.api_failures)}, "
            f"delays={len(self.delays)}, throttled={sorted(self.throttle_ms)}, "
            f"cuts={sorted(self.cut_after)}, intercepts={sorted(self.intercepts)})"
        )

    # -- scripting ---------------------------------------------------------

    def add_produce_failure(
        self, topic: str, partition: int, error_code: int, count: int, after_append: bool = False
    ) -> None:
        self.produce_failures.setdefault((topic, partition), []).append(
            [error_code, count, int(after_append)]
        )

    def add_api_failure(
        self, api_key: int, error_code: int, count: int, broker: int | None
    ) -> None:
        self.api_failures.append(_ApiFailure(count, api_key, error_code, broker))

    def add_delay(
        self, seconds: float, broker: int | None, api_key: int | None, count: int | None
    ) -> None:
        self.delays.append(_Delay(count, seconds, broker, api_key))

    # -- queries (each one consumes what fires) -----------------------------

    def take_produce_failure(self, topic: str, partition: int) -> tuple[int, bool] | None:
        """(error code, after append) for this partition in the current Produce, if scripted."""
        queue = self.produce_failures.get((topic, partition))
        if not queue:
            return None
        code, remaining, after_append = queue[0]
        if remaining <= 1:
            queue.pop(0)
            if not queue:
                del self.produce_failures[(topic, partition)]
        else:
            queue[0][1] = remaining - 1
        return code, bool(after_append)

    def take_api_failure(self, api_key: int, broker: int) -> int | None:
        for failure in self.api_failures:
            if failure.api_key == api_key and failure.broker in (None, broker) and failure.take():
                self.api_failures = [f for f in self.api_failures if not f.spent]
                return failure.error_code
        return None

    def take_delay(self, api_key: int, broker: int) -> float:
        for delay in self.delays:
            if delay.broker not in (None, broker) or delay.api_key not in (None, api_key):
                continue
            if delay.take():
                self.delays = [d for d in self.delays if not d.spent]
                return delay.seconds
        return 0.0

    def take_cut(self, broker: int) -> bool:
        """Whether this broker's response now being sent is to be cut in half."""
        left = self.cut_after.get(broker)
        if left is None:
            return False
        if left > 0:
            self.cut_after[broker] = left - 1
            return False
        del self.cut_after[broker]
        return True
