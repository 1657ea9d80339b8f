"""Where and when to connect: pure decisions the client acts on.

No I/O and no clock of its own: callers pass the state (connections, their
load, backoffs) and a random number, so each rule is tested without a loop.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["node_preference", "reconnect_delay"]


def reconnect_delay(failures: int, base_ms: int, max_ms: int, rand: float) -> float:
    """Seconds to wait after ``failures`` consecutive failed attempts (KIP-144, KIP-580).

    Exponential from ``base_ms`` up to ``max_ms`` with +/-20% jitter so that
    many clients do not retry in lockstep; ``rand`` is uniform in [0, 1).
    """
    if failures <= 0:
        return 0.0
    exp: float = min(max_ms, base_ms * (2 ** min(failures - 1, 30)))  # int ** int is typed Any
    return exp * (0.8 + 0.4 * rand) / 1000


def node_preference(
    nodes: Iterable[int],
    live_in_flight: dict[int, int],
    connecting: Iterable[int],
    can_connect: Iterable[int],
) -> list[int]:
    """Nodes in the order a cluster-wide request should try them (Java's ``leastLoadedNode``).

    First nodes with a usable, idle connection; then nodes being connected
    to; then nodes a connection may be opened to now; then usable connections
    with requests in flight, fewest first. Ties keep the given order, which
    the caller randomizes. Nodes that are none of these (backing off,
    throttled, a request overdue) are left out.

    Unlike Java, a busy connection ranks after a node we could connect to: a
    broker that stalled still holds its requests until ``request_timeout_ms``,
    and a metadata request queued behind them would wait as long.
    """
    order = list(nodes)
    rank = {node: i for i, node in enumerate(order)}
    idle = [n for n in order if live_in_flight.get(n) == 0]
    busy = sorted(
        (n for n in order if live_in_flight.get(n, 0) > 0),
        key=lambda n: (live_in_flight[n], rank[n]),
    )
    pending = set(connecting)
    conn_ok = set(can_connect)
    out = idle + [n for n in order if n in pending and n not in live_in_flight]
    out += [n for n in order if n in conn_ok and n not in live_in_flight and n not in pending]
    return out + busy
