"""Round trips to a coordinator: find it, send to it, find it again and retry.

:class:`CoordinatorLink` is the plumbing under :class:`.transactions.TransactionManager`
(and its couriers): FindCoordinator (key type 0 for a consumer group, 1 for a
transactional id), then the request, sent again after a backoff while the
answer says "ask again" (a moved or loading coordinator, a transaction still
completing), all within one deadline. It decides nothing about the
transaction: a fencing answer comes back as ProducerFencedError and
TRANSACTION_ABORTABLE as TransactionAbortableError, for the manager to turn
into its state.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import TypeVar

from .. import errors
from ..net.client import KafkaClient
from ..protocol.apis import COORDINATOR_KEY_TRANSACTION, FIND_COORDINATOR, Api
from ..protocol.generated import FindCoordinatorRequest
from ..telemetry.logs import ClientLogger
from .transaction_version import choose_version

__all__ = ["CoordinatorLink"]

Req = TypeVar("Req")
Resp = TypeVar("Resp")

# Answers that mean "ask again", possibly after finding the coordinator anew.
RETRY_CODES = frozenset(
    {
        errors.CoordinatorNotAvailableError.code,
        errors.NotCoordinatorError.code,
        errors.CoordinatorLoadInProgressError.code,
        errors.ConcurrentTransactionsError.code,
    }
)
_REFIND_CODES = frozenset(
    {errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code}
)
# This producer has been replaced by a newer one with the same transactional id.
_FENCED_CODES = frozenset({errors.ProducerFencedError.code, errors.InvalidProducerEpochError.code})


def _abortable(what: str) -> errors.TransactionAbortableError:
    """TRANSACTION_ABORTABLE (KIP-890), saying what the user does about it."""
    return errors.TransactionAbortableError(
        f"{what}: TRANSACTION_ABORTABLE; abort the open transaction and go on "
        "(before init_transactions() has succeeded: call it again)"
    )


class CoordinatorLink:
    """Requests to the coordinator of a transactional id (or of a group), retried within a deadline."""

    def __init__(
        self,
        client: KafkaClient,
        log: ClientLogger,
        transactional_id: str,
        max_block: float,
        backoff: float,
    ) -> None:
        self._client = client
        self._log = log
        self.transactional_id = transactional_id
        self.max_block = max_block
        self._backoff = backoff
        # The transaction coordinator, once found (a group's is looked up per request).
        self._coordinator: int | None = None
        # Requests sent to coordinators, by API name (observability, tests).
        self.requests_sent: collections.Counter[str] = collections.Counter()

    async def sleep_before(self, deadline: float) -> None:
        """Back off before asking again; KafkaTimeoutError once ``deadline`` has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.KafkaTimeoutError(
                f"the transaction coordinator did not answer within {self.max_block * 1000:.0f} ms"
            )
        await asyncio.sleep(min(self._backoff, left))

    async def _find(self, key: str, key_type: int, deadline: float) -> int:
        while True:
            node = self._client.connections.any_node()
            try:
                conn = await self._client.connections.connection(
                    node, max(0.0, deadline - time.monotonic())
                )
                version = conn.version_for(FIND_COORDINATOR)
                # v4 asks for a batch of keys (KIP-699): here always one.
                if version >= 4:
                    body = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
                else:
                    body = FindCoordinatorRequest(key=key, key_type=key_type)
                response = await conn.request(FIND_COORDINATOR, body, version=version)
            except (
                errors.KafkaConnectionError,
                errors.RequestTimedOutError,
                asyncio.TimeoutError,
            ) as exc:
                self._log.debug(
                    "FindCoordinator via broker %s failed: %s", node, exc, extra={"broker": node}
                )
                await self.sleep_before(deadline)
                continue
            if version >= 4:
                if not response.coordinators:
                    raise errors.CorruptResponseError(
                        f"FindCoordinator for {key!r} named no coordinator"
                    )
                entry = response.coordinators[0]
                code, node_id = entry.error_code, entry.node_id
            else:
                code, node_id = response.error_code, response.node_id
            if code in RETRY_CODES:
                await self.sleep_before(deadline)
                continue
            if code == errors.TransactionAbortableError.code:
                # v5+ (KIP-890): the manager makes it the transaction's state, as
                # Java's FindCoordinatorHandler does.
                raise _abortable(f"FindCoordinator for {key!r}")
            errors.raise_for_code(code, f"FindCoordinator for {key!r}")
            if node_id not in self._client.snapshot.brokers:
                self._client.request_update()
                await self._client.wait_for_update(max(0.0, deadline - time.monotonic()))
            return node_id

    async def request(
        self,
        api: Api[Req, Resp],
        body: Req | Callable[[int], Req],
        key: str,
        key_type: int,
        deadline: float,
        *,
        v2: bool,
    ) -> Resp:
        """Send ``api`` to the coordinator of ``key``, finding it again and retrying as needed.

        ``body`` is the request, or makes it for the version the coordinator speaks.

        Raises ProducerFencedError for a fencing answer, TransactionAbortableError
        for TRANSACTION_ABORTABLE (KIP-890 part 1), the error of any other code,
        and KafkaTimeoutError once ``deadline`` passes.
        """
        txn = key_type == COORDINATOR_KEY_TRANSACTION
        coordinator = self._coordinator if txn else None
        while True:
            if coordinator is None:
                coordinator = await self._find(key, key_type, deadline)
                if txn:
                    self._coordinator = coordinator
            try:
                conn = await self._client.connections.connection(
                    coordinator, max(0.0, deadline - time.monotonic())
                )
                version = choose_version(api.key, conn.version_for(api), v2=v2)
                self.requests_sent[api.name] += 1
                request = body(version) if callable(body) else body
                response = await conn.request(api, request, version=version)
            except (
                errors.KafkaConnectionError,
                errors.RequestTimedOutError,
                asyncio.TimeoutError,
            ) as exc:
                self._log.debug(
                    "%s to coordinator broker %s failed: %s",
                    api.name,
                    coordinator,
                    exc,
                    extra={"broker": coordinator},
                )
                coordinator = None
                await self.sleep_before(deadline)
                continue
            # AddPartitionsToTxn and TxnOffsetCommit answer per partition: no top-level code.
            code: int = getattr(response, "error_code", 0)
            if code in _REFIND_CODES:
                coordinator = None
            if code in RETRY_CODES:
                await self.sleep_before(deadline)
                continue
            if code in _FENCED_CODES:
                raise errors.ProducerFencedError(
                    f"transactional id {self.transactional_id!r} is used by a newer producer"
                )
            if code == errors.TransactionAbortableError.code:
                raise _abortable(f"{api.name} for transactional id {self.transactional_id!r}")
            if code:
                errors.raise_for_code(
                    code, f"{api.name} for transactional id {self.transactional_id!r}"
                )
            return response
