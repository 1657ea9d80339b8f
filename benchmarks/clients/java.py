"""Java's ``KafkaProducer`` (the reference client) in patterns a and b.

This process compiles ``benchmarks/java/ProducerBench.java`` against the
fetched Kafka jars (once; reused while newer than the source), starts it as a
child JVM and prints the same JSON result line as the Python clients. The JVM
warms up (one acknowledged record) and then waits on stdin at each edge of the
measured span, so this process reads the child's CPU time there from
``/proc/<pid>/stat``: user + system time of the whole JVM (every thread, the
garbage collector's and the JIT compiler's too), the same measure the Python
clients take of themselves with ``getrusage(RUSAGE_SELF)``. The JVM's own
reading (``getProcessCpuTime``, nanosecond resolution) is kept beside it as
``jvm_cpu_s``, and the CPU of the whole child process, JVM start-up and
shutdown included, as ``process_cpu_s`` (``getrusage(RUSAGE_CHILDREN)``).

A JVM runs its hot paths interpreted until the JIT compiler has seen them
thousands of times, so the Java peer sends :data:`WARMUP` records (acknowledged)
before the span where the Python clients send one: the span then measures
Java's steady state, as it does for the others. The result line says how many
(``warmup_records``); the orchestrator expects them on the broker too.

Java has no asyncio API (pattern c) and no bulk API (pattern d): those rows
are skipped.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from benchmarks.clients._common import Config, parse_args

SOURCE = Path(__file__).resolve().parent.parent / "java" / "ProducerBench.java"
# The JVM's defaults (G1, a heap of a quarter of the RAM) are what a Java service
# runs with; the bound only keeps a big host from growing a huge heap.
JVM_OPTIONS = ("-Xmx1g",)
PATTERNS = ("a", "b")
# Records sent before the span; enough for the JIT to compile the send path.
WARMUP = 20_000


def _emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # The orchestrator kills this process on timeout; the JVM must not outlive it.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads, live and exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _read_event(stdout: IO[str], want: str) -> dict[str, Any]:
    for line in stdout:
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == want:
                return event
    raise RuntimeError(f"the JVM exited before reporting {want!r}")


def command(cfg: Config, warmup: int = WARMUP) -> list[str]:
    """The JVM command line for ``cfg`` (compiling ProducerBench first if needed)."""
    from tests.support.javac import compile_java

    program = compile_java([SOURCE], "bench")
    return program.command(
        "ProducerBench",
        "--bootstrap",
        cfg.bootstrap,
        "--topic",
        cfg.topic,
        "--pattern",
        cfg.pattern,
        "--records",
        str(cfg.records),
        "--size",
        str(cfg.size),
        "--linger-ms",
        str(cfg.linger_ms),
        "--batch-size",
        str(cfg.batch_size),
        "--idempotence",
        "on" if cfg.idempotence else "off",
        "--compression",
        cfg.compression,
        "--chunk",
        str(cfg.chunk),
        "--warmup-records",
        str(warmup),
        jvm_options=JVM_OPTIONS,
    )


def measure(cfg: Config, warmup: int = WARMUP) -> dict[str, Any]:
    """Run the JVM through one measured span; the figures of the result line."""
    cmd = command(cfg, warmup)  # javac, if it runs, is a child too: count CPU from here on
    children0 = _children_cpu_s()
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            # This process runs no thread, so preexec_fn is safe here.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            _read_event(proc.stdout, "ready")
            cpu0 = proc_cpu_s(proc.pid)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            done = _read_event(proc.stdout, "done")
            cpu1 = proc_cpu_s(proc.pid)
            proc.stdin.write("close\n")
            proc.stdin.flush()
            proc.stdin.close()
            code = proc.wait(120)
        except BaseException:
            proc.kill()
            proc.wait()
            stderr.seek(0)
            sys.stderr.write(stderr.read()[-4000:])
            raise
        if code != 0:
            stderr.seek(0)
            raise RuntimeError(f"the JVM exited with {code}: {stderr.read()[-2000:]}")
    process_cpu = _children_cpu_s() - children0
    if done["failed"] or done["acked"] != cfg.records:
        raise RuntimeError(
            f"{done['acked']} of {cfg.records} records acknowledged, "
            f"{done['failed']} failed, first: {done['first_error']}"
        )
    jvm_cpu = done["jvm_cpu_ns"] / 1e9
    # /proc counts in clock ticks (10 ms): the JVM's own nanosecond reading of the
    # same quantity stands in where /proc is missing.
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else jvm_cpu
    wall = done["wall_ns"] / 1e9
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "records_per_s": cfg.records / wall,
        "cpu_us_per_record": cpu * 1e6 / cfg.records,
        "jvm_cpu_s": jvm_cpu,
        "process_cpu_s": process_cpu,
        "warmup_records": warmup,
    }


def main(argv: list[str] | None = None) -> int:
    """Exit codes as the other clients: 0 ok, 1 failed, 3 skipped."""
    argv = list(sys.argv[1:] if argv is None else argv)
    warmup = WARMUP
    if "--warmup-records" in argv:  # this client's own option, beside the shared ones
        at = argv.index("--warmup-records")
        warmup = int(argv[at + 1])
        del argv[at : at + 2]
    cfg = parse_args(argv)
    base: dict[str, Any] = {
        "client": "java",
        "pattern": cfg.pattern,
        "records": cfg.records,
        "size": cfg.size,
        "idempotence": cfg.idempotence,
        "loop": cfg.loop,
        "warmup_records": warmup,
        "topic": cfg.topic,
    }
    if cfg.pattern not in PATTERNS:
        _emit({**base, "status": "skipped", "error": f"java has no API for pattern {cfg.pattern}"})
        return 3
    from tests.support.kafka_broker import KafkaJarsUnavailable

    started = time.perf_counter()
    try:
        figures = measure(cfg, warmup)
    except KafkaJarsUnavailable as exc:  # no JDK or no jars: not this client's failure
        _emit({**base, "status": "skipped", "error": str(exc)})
        return 3
    except BaseException as exc:  # noqa: BLE001 - report everything, even Ctrl-C mid-run
        _emit({**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}"})
        return 1
    _emit({**base, **figures, "status": "ok", "elapsed_s": time.perf_counter() - started})
    return 0


if __name__ == "__main__":
    sys.exit(main())
