"""Network namespaces that put each node of a test cluster on its own host, and cut links.

:class:`NamespaceNetwork` makes one Linux network namespace per node, each
joined to a bridge in the calling process's namespace by its own veth pair, all
in one private ``/24``. Each node gets two addresses: one for its broker
listener, one for its controller listener, so that controller traffic can be
cut while replication and client traffic still flow. The bridge holds two
addresses of its own: the *client* address, the source of every connection
this process opens without choosing one (a producer under test), and the
*harness* address, which fixtures bind their probes to so that they keep
seeing the cluster while clients are cut off.

Links are cut with blackhole routes on the sending side (only ``ip`` is
needed; no iptables, nft or tc): a packet towards a blackholed address is
dropped before it leaves the namespace. Cutting both directions of a pair
makes a symmetric partition; cutting a node's route to the client address
alone makes the node deaf towards clients while it still receives (what a
client sent may be written, and the answer lost).

Everything this makes is named ``kfn<pid><n>...`` so that parallel runs never
collide and :func:`remove_leftovers` can delete what a crashed run left behind
(its pid no longer exists). Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and
``ip`` from iproute2; :func:`unavailable_reason` says why it cannot be used.

Example::

    with NamespaceNetwork([1, 2, 3]) as net:
        cluster = KafkaCluster(network=net).start()
        net.cut_controllers(1)      # node 1 no longer reaches any controller
        net.heal()
"""

from __future__ import annotations

import atexit
import ipaddress
import itertools
import os
import random
import re
import shutil
import subprocess
import sys
import weakref
from collections.abc import Iterable
from types import TracebackType

__all__ = [
    "NamespaceNetwork",
    "NamespaceUnavailable",
    "remove_leftovers",
    "unavailable_reason",
]

PREFIX = "kfn"
_NAME = re.compile(rf"^{PREFIX}([0-9a-f]{{6}})[0-9a-f]")
_SEQUENCE = itertools.count()
_LIVE: weakref.WeakSet[NamespaceNetwork] = weakref.WeakSet()


class NamespaceUnavailable(RuntimeError):
    """This environment cannot create network namespaces (not Linux, not root, no ``ip``)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            ["ip", *args], capture_output=True, text=True, timeout=30, check=False
        )
    except FileNotFoundError:
        raise NamespaceUnavailable("network namespaces need `ip` from iproute2 on PATH") from None
    if check and result.returncode != 0:
        raise NamespaceUnavailable(
            f"`ip {' '.join(args)}` failed (exit {result.returncode}): {result.stderr.strip()}"
        )
    return result


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here, or None if they can (a namespace is tried)."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux, not {sys.platform}"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    if shutil.which("ip") is None:
        return "network namespaces need `ip` from iproute2 on PATH"
    name = f"{PREFIX}{os.getpid():06x}{next(_SEQUENCE) % 16:x}probe"
    try:
        _ip("netns", "add", name)
    except NamespaceUnavailable as exc:
        return str(exc)
    _ip("netns", "del", name, check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Delete the namespaces and links of runs whose process is gone; return their names."""
    removed: list[str] = []
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for name in (line.split()[0] for line in listed if line.strip()):
        match = _NAME.match(name)
        if match and not _pid_alive(int(match.group(1), 16)):
            _ip("netns", "del", name, check=False)
            removed.append(name)
    links = _ip("-o", "link", "show", check=False).stdout.split("\n")
    for line in links:
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        match = _NAME.match(name)
        if match and not _pid_alive(int(match.group(1), 16)):
            _ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A ``10.x.y.0/24`` no route of this namespace uses yet."""
    used = []
    for line in _ip("-o", "-4", "route", "show", "table", "all", check=False).stdout.split("\n"):
        token = line.split(" ")[0] if line else ""
        if token.startswith("local") or token in ("broadcast", "blackhole"):
            token = line.split(" ")[1]
        try:
            used.append(ipaddress.ip_network(token, strict=False))
        except ValueError:
            continue
    rng = random.Random()
    for _ in range(1000):
        candidate = ipaddress.IPv4Network(f"10.{rng.randint(64, 254)}.{rng.randint(0, 255)}.0/24")
        if not any(candidate.overlaps(u) for u in used):
            return candidate
    raise NamespaceUnavailable("no free 10.x.y.0/24 subnet for a namespace network")


class NamespaceNetwork:
    """One network namespace per node, bridged to the caller's namespace.

    Args:
        nodes: the node ids; node ``n`` gets namespace :meth:`namespace` ``(n)``.

    Raises:
        NamespaceUnavailable: a namespace, link or address could not be made
            (what was made is removed again).
    """

    def __init__(self, nodes: Iterable[int]) -> None:
        self.nodes = sorted(set(nodes))
        if not self.nodes or len(self.nodes) > 80:
            raise ValueError(f"a namespace network holds 1 to 80 nodes, not {len(self.nodes)}")
        self.tag = f"{PREFIX}{os.getpid() % 0x1000000:06x}{next(_SEQUENCE) % 16:x}"
        self.subnet = _free_subnet()
        self._cuts: set[tuple[int, str]] = set()  # (node, address blackholed there)
        self._made = False
        _LIVE.add(self)

    # -- names and addresses ------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    def namespace(self, node: int) -> str:
        """The name of node ``node``'s namespace (``ip netns exec <name> ...``)."""
        self._check(node)
        return f"{self.tag}n{node}"

    def _host_link(self, node: int) -> str:
        return f"{self.tag}h{node}"

    def _node_link(self, node: int) -> str:
        return f"{self.tag}v{node}"

    def _address(self, offset: int) -> str:
        return str(self.subnet.network_address + offset)

    @property
    def client_address(self) -> str:
        """The source of connections this namespace opens without binding (clients)."""
        return self._address(1)

    @property
    def harness_address(self) -> str:
        """The address fixtures bind their probes to: never cut."""
        return self._address(2)

    def broker_address(self, node: int) -> str:
        """Node ``node``'s address for clients and replication."""
        self._check(node)
        return self._address(10 + node)

    def controller_address(self, node: int) -> str:
        """Node ``node``'s address for the controller quorum (KRaft)."""
        self._check(node)
        return self._address(100 + node)

    def exec_prefix(self, node: int) -> list[str]:
        """The command prefix that runs a program inside node ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def _check(self, node: int) -> None:
        if node not in self.nodes:
            raise KeyError(f"no node {node} in this network; it has {self.nodes}")

    # -- lifecycle ------------------------------------------------------------------------

    def create(self) -> NamespaceNetwork:
        """Make the bridge, the namespaces and the veth pairs; remove leftovers of dead runs."""
        if self._made:
            return self
        remove_leftovers()
        self._made = True
        try:
            prefix = self.subnet.prefixlen
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.client_address}/{prefix}", "dev", self.bridge)
            _ip("addr", "add", f"{self.harness_address}/{prefix}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for node in self.nodes:
                ns, host, inner = self.namespace(node), self._host_link(node), self._node_link(node)
                _ip("netns", "add", ns)
                _ip("link", "add", host, "type", "veth", "peer", "name", inner)
                _ip("link", "set", inner, "netns", ns)
                _ip("link", "set", host, "master", self.bridge, "up")
                inside = ["-n", ns]
                # The broker address first: it is the source of the node's own connections.
                _ip(*inside, "addr", "add", f"{self.broker_address(node)}/{prefix}", "dev", inner)
                _ip(
                    *inside,
                    "addr",
                    "add",
                    f"{self.controller_address(node)}/{prefix}",
                    "dev",
                    inner,
                )
                _ip(*inside, "link", "set", inner, "up")
                _ip(*inside, "link", "set", "lo", "up")
        except BaseException:
            self.delete()
            raise
        return self

    def delete(self) -> None:
        """Remove every namespace and link this network made (idempotent).

        Processes still running inside a namespace keep it alive, unnamed and
        unreachable, until they exit: stop them first.
        """
        if not self._made:
            return
        for node in self.nodes:
            _ip("netns", "del", self.namespace(node), check=False)
            _ip("link", "del", self._host_link(node), check=False)
        _ip("link", "del", self.bridge, check=False)
        self._cuts.clear()
        self._made = False

    def __enter__(self) -> NamespaceNetwork:
        return self.create()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.delete()

    def __repr__(self) -> str:
        return f"<NamespaceNetwork {self.tag} {self.subnet} cuts={sorted(map(str, self._cuts))}>"

    # -- cutting links ---------------------------------------------------------------------

    def _blackhole(self, where: int, address: str) -> None:
        if (where, address) in self._cuts:
            return
        _ip("-n", self.namespace(where), "route", "add", "blackhole", f"{address}/32")
        self._cuts.add((where, address))

    def cut_controllers(self, node: int) -> None:
        """Cut node ``node`` off every other node's controller, both ways.

        Its broker no longer heartbeats to the active controller nor sees
        new metadata; its own controller leaves the quorum. Replication and
        client traffic are untouched.
        """
        self._check(node)
        for other in self.nodes:
            if other != node:
                self._blackhole(node, self.controller_address(other))
                self._blackhole(other, self.controller_address(node))

    def isolate(self, node: int) -> None:
        """Cut node ``node`` off every other node (brokers and controllers); clients still reach it."""
        self.cut_controllers(node)
        for other in self.nodes:
            if other != node:
                self._blackhole(node, self.broker_address(other))
                self._blackhole(other, self.broker_address(node))

    def cut_clients(self, node: int) -> None:
        """Node ``node`` no longer answers clients: what it sends to the client address is dropped.

        Clients' packets still arrive (a request may be written, its answer
        is lost); new connections hang in the handshake. The harness address
        and the other nodes still reach it.
        """
        self._blackhole(node, self.client_address)

    def quorum_lost(self, node: int) -> bool:
        """True while node ``node`` reaches no majority of the controllers (itself included).

        Such a node no longer hears the metadata log: what it says about
        leaders is stale.
        """
        reached = [
            other
            for other in self.nodes
            if (node, self.controller_address(other)) not in self._cuts
        ]
        return 2 * len(reached) <= len(self.nodes)

    def heal(self) -> None:
        """Remove every cut."""
        for where, address in sorted(self._cuts):
            _ip(
                "-n",
                self.namespace(where),
                "route",
                "del",
                "blackhole",
                f"{address}/32",
                check=False,
            )
        self._cuts.clear()

    @property
    def cuts(self) -> set[tuple[int, str]]:
        """``(node, address)`` pairs: packets from ``node`` to ``address`` are dropped."""
        return set(self._cuts)


@atexit.register
def _delete_live() -> None:
    for network in list(_LIVE):
        try:
            network.delete()
        except Exception:  # noqa: BLE001, S110 - interpreter exit: delete the others regardless
            pass
