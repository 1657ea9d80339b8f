"""Failover time: a partition leader SIGKILLed under a steady load, per client, on one cluster.

Usage (from the repository root)::

    python -m benchmarks.failover                          # 5 kills per client at 10,000 records/s
    python -m benchmarks.failover --kills 1 --rate 2000    # a smoke run (~2 min)
    python -m benchmarks.failover --clients aioproducer,java --json failover.json

A three-node Apache Kafka cluster (:class:`tests.support.kafka_cluster.KafkaCluster`:
replication factor 3, ``min.insync.replicas=2``) runs for the whole benchmark.
For each kill and each client in turn (the order rotates every round), the
client runs in a process of its own (``benchmarks/failover_clients.py``, or
``benchmarks/java/FailoverBench.java`` for Java's producer) and sends ``--rate``
records/s of ``--size`` bytes, idempotent with ``acks=all``, to a fresh topic of
one partition. After ``--warmup`` seconds the partition's leader is SIGKILLed;
``--after`` seconds later the client stops, waits for every outcome and
reports each record's due time and acknowledgement time. The killed node is
started again before the next client runs.

Per kill and client:

* **kill -> first ack on the new leader**: from the kill to the first
  acknowledgement that ends a silence of at least 0.5 s on the partition
  (the answers the dying leader sent before it died arrive within
  milliseconds; at these rates acknowledgements otherwise come every few
  milliseconds);
* **p99 / max send->ack** of the records due from 1 s before the kill to the
  stop, each from the moment it was due (no coordinated omission);
* the time until the harness, polling Metadata every 0.1 s, saw the new leader
  (the same for every client: the cluster's part);
* records that failed, and whether the broker holds exactly the acknowledged
  records (read back with librdkafka).

The table printed at the end (Markdown, the medians of the kills, their
min-max beside them) is the one in ``docs/failover.md``; ``--output
docs/failover.md`` puts it there, between the page's table markers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.kafka_broker import KAFKA_VERSION
from tests.support.kafka_cluster import CLUSTER_PROPERTIES, KafkaCluster

CLIENTS = ("aioproducer", "aioproducer-no-hints", "java", "librdkafka")
NAMES = {
    "aioproducer": "aioproducer",
    "aioproducer-no-hints": "aioproducer, leader hints ignored",
    "java": "Java KafkaProducer",
    "librdkafka": "librdkafka (confluent-kafka)",
}
JAVA_SOURCE = REPO_ROOT / "benchmarks" / "java" / "FailoverBench.java"
MARK_BEGIN, MARK_END = "<!-- failover-table -->", "<!-- /failover-table -->"
SILENCE_US = 500_000
BEFORE_KILL_US = 1_000_000


@dataclass
class Kill:
    """One client through one kill."""

    client: str
    round: int
    node: int
    elected_s: float
    failover_s: float | None
    p99_ms: float | None
    max_ms: float | None
    sent: int
    failed: int
    on_broker: int | None
    first_error: str | None = None

    @property
    def own_s(self) -> float | None:
        """Kill -> first ack, less the time until the harness saw the new leader:
        the client's own part (how soon it asked again and moved its batches)."""
        return None if self.failover_s is None else self.failover_s - self.elected_s

    @property
    def count_ok(self) -> bool | None:
        # +1: the warm-up record each client sends before it reports ready.
        return None if self.on_broker is None else self.on_broker == self.sent - self.failed + 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kills", type=int, default=5, help="kills per client (default 5)")
    p.add_argument("--rate", type=int, default=10_000, help="records per second (default 10000)")
    p.add_argument("--size", type=int, default=100, help="value size in bytes (default 100)")
    p.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma list of {','.join(CLIENTS)}"
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds of steady sending before the kill (default 5)",
    )
    p.add_argument(
        "--after",
        type=float,
        default=12.0,
        help="seconds from the kill to the client's stop (default 12)",
    )
    p.add_argument(
        "--compression", default="none", help="every client's compression (default none)"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a client process may take")
    p.add_argument("--json", help="write every kill's figures to this file")
    p.add_argument(
        "--output",
        help="put the table into this Markdown page, between its markers "
        f"{MARK_BEGIN} and {MARK_END}",
    )
    p.add_argument(
        "--from-json", help="no run: redraw the table from a --json file of an earlier run"
    )
    p.add_argument("--no-verify", action="store_true", help="skip reading the records back")
    args = p.parse_args(argv)
    args.client_list = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(args.client_list) - set(CLIENTS)
    if unknown:
        p.error(f"unknown clients {sorted(unknown)}; choose from {', '.join(CLIENTS)}")
    if args.kills < 1 or args.rate < 1 or args.after <= 1.0:
        p.error("--kills and --rate must be positive and --after more than 1 s")
    return args


def client_command(
    client: str, bootstrap: str, topic: str, out: str, args: argparse.Namespace
) -> list[str]:
    common = [
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--rate",
        str(args.rate),
        "--size",
        str(args.size),
        "--compression",
        args.compression,
        "--out",
        out,
    ]
    if client == "java":
        from tests.support.javac import compile_java

        program = compile_java([JAVA_SOURCE], "failover-bench")
        return program.command("FailoverBench", *common, jvm_options=("-Xmx512m",))
    return [sys.executable, "-m", "benchmarks.failover_clients", "--client", client, *common]


def _read_event(stdout: IO[str], want: str) -> dict[str, Any]:
    for line in stdout:
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == want:
                return event
    raise RuntimeError(f"the client exited before reporting {want!r}")


def failover_seconds(kill_us: int, ack_us: list[int]) -> float | None:
    """Kill to the first acknowledgement ending a silence of ``SILENCE_US`` (see the module doc)."""
    acks = sorted(a for a in ack_us if a > 0)
    previous = None
    for ack in acks:
        if ack > kill_us and previous is not None and ack - previous >= SILENCE_US:
            return (ack - kill_us) / 1e6
        previous = ack
    after = [a for a in acks if a > kill_us]  # no silence: the failover was faster than that
    return (after[0] - kill_us) / 1e6 if after else None


def latency_ms(
    kill_us: int, due_us: list[int], ack_us: list[int]
) -> tuple[float | None, float | None]:
    """p99 and max send->ack of the acknowledged records due from 1 s before the kill."""
    lat = sorted(
        (a - d) / 1000 for d, a in zip(due_us, ack_us) if d >= kill_us - BEFORE_KILL_US and a > 0
    )
    if not lat:
        return None, None
    return lat[min(len(lat) - 1, int(0.99 * len(lat)))], lat[-1]


def one_kill(cluster: KafkaCluster, client: str, round_no: int, args: argparse.Namespace) -> Kill:
    from tests.support.verify import count_records, create_topic

    topic = f"failover-{client}-{round_no}-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic, 1, replication_factor=3)
    cluster.wait_for_isr(topic, 3)
    with tempfile.TemporaryDirectory(prefix="failover-") as tmp:
        out = str(Path(tmp) / "records.json")
        cmd = client_command(client, cluster.bootstrap_servers, topic, out, args)
        with open(Path(tmp) / "stderr", "w+") as stderr:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=REPO_ROOT,
            )
            watchdog = threading.Timer(args.timeout, proc.kill)
            watchdog.start()
            node = -1
            try:
                assert proc.stdin is not None and proc.stdout is not None
                _read_event(proc.stdout, "ready")
                time.sleep(args.warmup)
                node = cluster.leader(topic, 0)
                kill_us = time.time_ns() // 1000
                cluster.kill(node)
                cluster.wait_for_leader(topic, 0, not_in={node}, timeout=120)
                elected_s = time.time() - kill_us / 1e6
                time.sleep(max(0.0, kill_us / 1e6 + args.after - time.time()))
                proc.stdin.write("stop\n")
                proc.stdin.flush()
                _read_event(proc.stdout, "done")
                proc.wait(60)
            except BaseException:
                proc.kill()
                proc.wait()
                stderr.seek(0)
                sys.stderr.write(stderr.read()[-4000:])
                raise
            finally:
                watchdog.cancel()
                if node > 0 and not cluster.broker(node).is_running:
                    cluster.start(node)
                    cluster.wait_for_nodes(timeout=120)
        data = json.loads(Path(out).read_text())
    due, acks = data["due_us"], data["ack_us"]
    p99, worst = latency_ms(kill_us, due, acks)
    sent, failed = len(due), int(data["failed"])
    on_broker = None
    if not args.no_verify:
        on_broker = count_records(cluster.bootstrap_servers, topic, sent - failed + 1, timeout=120)
    return Kill(
        client,
        round_no,
        node,
        elected_s,
        failover_seconds(kill_us, acks),
        p99,
        worst,
        sent,
        failed,
        on_broker,
        data.get("first_error"),
    )


def _median(values: list[float | None], fmt: str) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    middle = fmt.format(statistics.median(known))
    if len(known) == 1:
        return middle
    return f"{middle} ({fmt.format(min(known))}–{fmt.format(max(known))})"


def table(kills: list[Kill], args: argparse.Namespace) -> str:
    """The Markdown table of the medians per client (min–max of the kills in brackets)."""
    session_ms = CLUSTER_PROPERTIES["broker.session.timeout.ms"]
    lines = [
        (
            f"Apache Kafka {KAFKA_VERSION}, 3 KRaft nodes, replication factor 3, "
            f"min.insync.replicas=2, broker.session.timeout.ms={session_ms}; {args.rate:,} "
            f"records/s of {args.size} B, idempotent, acks=all, linger.ms=5, compression "
            f"{args.compression}; median of {args.kills} kill(s) per client (min–max)."
        ),
        "",
        (
            "| client | kill → first ack on the new leader (s) | p99 send→ack across the kill (ms) "
            "| max send→ack (ms) | new leader seen by the harness (s) | the client's own part (s) "
            "| records failed | broker holds exactly the acked |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for client in args.client_list:
        mine = [k for k in kills if k.client == client]
        if not mine:
            lines.append(f"| {NAMES[client]} | failed | | | | | | |")
            continue
        checks = [k.count_ok for k in mine]
        held = (
            "not checked"
            if all(c is None for c in checks)
            else (
                "yes"
                if all(checks)
                else f"no ({sum(1 for c in checks if c is False)} of {len(mine)} kills)"
            )
        )
        lines.append(
            f"| {NAMES[client]} | {_median([k.failover_s for k in mine], '{:.2f}')} "
            f"| {_median([k.p99_ms for k in mine], '{:.0f}')} "
            f"| {_median([k.max_ms for k in mine], '{:.0f}')} "
            f"| {_median([k.elected_s for k in mine], '{:.2f}')} "
            f"| {_median([k.own_s for k in mine], '{:.2f}')} "
            f"| {sum(k.failed for k in mine)} of {sum(k.sent for k in mine):,} | {held} |"
        )
    return "\n".join(lines)


def write_page(path: Path, text: str) -> None:
    """Replace what lies between the page's table markers with ``text``."""
    page = path.read_text()
    begin, end = page.find(MARK_BEGIN), page.find(MARK_END)
    if begin < 0 or end < begin:
        raise ValueError(f"{path} has no {MARK_BEGIN} ... {MARK_END} markers")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = f"{MARK_BEGIN}\nGenerated by `python -m benchmarks.failover` on {stamp}. {text}\n"
    path.write_text(page[:begin] + body + page[end:])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        kills = [Kill(**k) for k in json.loads(Path(args.from_json).read_text())]
        args.kills = max(sum(1 for k in kills if k.client == c) for c in args.client_list)
        text = table(kills, args)
        print(text)
        if args.output:
            write_page(Path(args.output), text)
        return 0
    cluster = KafkaCluster()
    kills: list[Kill] = []
    failures: list[str] = []
    try:
        cluster.start()
        print(
            f"cluster of 3 nodes serving after {cluster.startup_seconds:.1f} s at "
            f"{cluster.bootstrap_servers}",
            file=sys.stderr,
        )
        for round_no in range(args.kills):
            shift = round_no % len(args.client_list)
            for client in args.client_list[shift:] + args.client_list[:shift]:
                try:
                    kill = one_kill(cluster, client, round_no, args)
                except Exception as exc:  # noqa: BLE001 - one client's failure, the others go on
                    failures.append(f"{client}, kill {round_no + 1}: {type(exc).__name__}: {exc}")
                    print(f"  {client} kill {round_no + 1}: FAILED {exc}", file=sys.stderr)
                    continue
                kills.append(kill)
                print(
                    f"  {client} kill {round_no + 1}: node {kill.node}, failover "
                    f"{kill.failover_s} s, p99 {kill.p99_ms} ms, max {kill.max_ms} ms, "
                    f"new leader seen after {kill.elected_s:.2f} s, {kill.failed} failed, "
                    f"on broker {kill.on_broker}/{kill.sent - kill.failed + 1}",
                    file=sys.stderr,
                )
    finally:
        cluster.stop()
        cluster.cleanup()
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(k) for k in kills], indent=1))
    text = table(kills, args)
    print(text)
    if args.output:
        write_page(Path(args.output), text)
    for line in failures:
        print(f"\n- failed: {line}")
    bad = [k for k in kills if k.count_ok is False or k.failover_s is None]
    return 1 if failures or bad else 0


if __name__ == "__main__":
    sys.exit(main())
