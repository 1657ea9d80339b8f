"""Where the web service's CPU goes: py-spy samples, process CPU and Produce request counts.

Used by ``python -m benchmarks.web_load --profile DIR``. For each run:

* ``py-spy record --format raw --rate 200`` samples the service process while
  the load generator runs (idle stacks are left out, as py-spy does by
  default, so samples follow CPU time). Each sample goes to one category:
  ``producer`` when ANY frame of its stack is in the producer's package
  (inclusive attribution: the producer's work run from the event loop or from
  aiohttp counts as the producer's), else by its innermost frame: ``aiohttp``
  (aiohttp, multidict, yarl), ``asyncio`` (asyncio, selectors), ``json/handler``
  (json, the example handler, prometheus_client) or ``other``. The handler's
  topic-name check (``check_topic``, done for both implementations) is the
  handler's, not the producer's.
* py-spy counts a stack whenever the thread is not sleeping, and on a busy
  machine that includes time spent runnable but waiting for a core (a write
  that wakes the broker's thread is often preempted on the spot). So the
  service also samples itself on CPU time: ``setitimer(ITIMER_PROF)`` at the
  same rate, stacks written in py-spy's raw format and attributed the same
  way (``cpu`` shares; a C call's time goes to the Python frame that made it).
* With ``--perf`` (Linux ``perf``, CPython 3.13+): ``perf record`` samples the
  service on CPU time with its whole stack, C and Python together (the service
  runs with ``-X perf_jit``, which gives each Python frame a symbol perf can
  unwind through). No signal handler is involved, so each sample lands in the
  function that was running, where the ``ITIMER_PROF`` handler only runs at the
  interpreter's next check of its eval breaker and charges the C work before it
  to whichever frame checks. Attributed the same way (``perf`` shares), with
  one addition: the producer package's compiled frames (its extension modules)
  are kept, and a sample whose innermost frame, Python or the package's
  compiled code, is such a frame is the producer's. That is the work of a
  compiled method called from outside the package (a record handle's
  ``result()`` from the handler, ``add_done_callback`` from ``asyncio.wait``),
  which has no Python frame of the package. The Python code such a method calls
  back (a done callback run for a batch) stays its own: asyncio runs an
  ``asyncio.Future``'s callbacks as loop callbacks, outside the code that
  resolved the future.
* CPU seconds of the service, the broker (the process listening on the
  bootstrap port, read from ``/proc``) and the load generator over the run.
* In the service: Produce requests, batches and records (counted by wrapping
  each implementation's per-request send method), event loop iterations and
  timers scheduled (``call_at``, which ``call_later`` goes through).
"""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CATEGORIES = ("producer", "aiohttp", "asyncio", "json/handler", "other")
PY_SPY_RATE = 200
STATS_PREFIX = "STATS "

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*):\d+\)$")


def package_dir(impl: str) -> str:
    """The directory of the producer package behind ``impl`` (aioproducer or aiokafka)."""
    spec = importlib.util.find_spec(impl)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the {impl} package")
    return str(Path(next(iter(spec.submodule_search_locations))).resolve()) + os.sep


def _compiled(path: str) -> bool:
    """A frame of an extension module (perf's folded stacks keep the producer's)."""
    return path.endswith((".so", ".pyd"))


def _category(frames: list[tuple[str, str]], producer_dir: str) -> str:
    python = [(func, path) for func, path in frames if not _compiled(path)]
    for func, path in python:
        if path.startswith(producer_dir) and func != "check_topic":
            return "producer"
        if func.startswith("AiokafkaAdapter."):  # the aiokafka side's two-line shim
            return "producer"
    # The package's compiled code, innermost: its own work (and CPython's for
    # it), not the Python code it calls back.
    if frames and _compiled(frames[-1][1]) and frames[-1][1].startswith(producer_dir):
        return "producer"
    func, path = python[-1] if python else ("", "")
    if any(p in path for p in ("/aiohttp/", "/multidict/", "/yarl/")):
        return "aiohttp"
    if "/asyncio/" in path or path.endswith("/selectors.py"):
        return "asyncio"
    if "/json/" in path or path.endswith("aiohttp_service.py") or "/prometheus_client/" in path:
        return "json/handler"
    return "other"


def attribute(raw: str, producer_dir: str) -> collections.Counter[str]:
    """Samples per category from py-spy's raw output (``frame;frame;... count`` lines)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = []
        for frame in stack.split(";"):
            m = _FRAME.match(frame)
            if m:
                frames.append((m["func"], m["file"]))
        counts[_category(frames, producer_dir)] += int(n)
    return counts


def shares(counts: collections.Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {c: (counts[c] / total if total else float("nan")) for c in CATEGORIES}


def stop(proc: subprocess.Popen[str], sig: int, timeout: float) -> tuple[str, str]:
    """Send ``sig`` to ``proc`` and collect its output; killed if it has not exited in ``timeout`` s."""
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


@contextmanager
def py_spy(pid: int, output: Path) -> Iterator[None]:
    """Sample ``pid`` with py-spy for the block; the raw stacks land in ``output``."""
    exe = Path(sys.executable).with_name("py-spy")
    cmd = [
        str(exe) if exe.exists() else "py-spy",
        "record",
        "--format",
        "raw",
        "--rate",
        str(PY_SPY_RATE),
        "--full-filenames",
        "--pid",
        str(pid),
        "-o",
        str(output),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield
    finally:
        _, err = stop(proc, signal.SIGINT, 60)  # py-spy writes its output on SIGINT
        if not output.exists():
            raise RuntimeError(f"py-spy wrote no profile (exit {proc.returncode}): {err[-500:]}")


PERF_RATE = 199
# Where CPython's perf_jit writes its jitdump (a fixed path), and perf inject its .so files.
JIT_DIR = Path("/tmp")
# py::qualname:path, a Python frame's symbol under -X perf_jit (perf inject --jit)
_PERF_PY = re.compile(r"^py::(?P<func>[^:]+):(?P<file>.+?)(?:\+0x[0-9a-f]+)?$")
# A `perf script -F ip,sym,dso` line: address, symbol, and its object in brackets
# ("inlined" for a frame inlined into the next line's function, at the same address).
_PERF_LINE = re.compile(r"^\s*(?P<ip>[0-9a-f]+) (?P<sym>.*?)(?: \((?P<dso>[^()]*)\))?$")


def perf_unavailable() -> str | None:
    """Why ``--perf`` cannot run here, or None."""
    if sys.version_info < (3, 13):
        return "--perf needs CPython 3.13+ (-X perf_jit), run the benchmark with it"
    if shutil.which("perf") is None:
        return "--perf needs Linux perf on PATH"
    return None


def perf_env() -> dict[str, str]:
    """The service's environment additions for ``perf_record`` (Python frames as symbols)."""
    return {"PYTHON_PERF_JIT_SUPPORT": "1"}


def fold_perf_script(text: str, keep: str | None = None) -> str:
    """``perf script -F ip,sym,dso`` stacks as py-spy's raw format, root first: the
    Python frames, and the compiled ones of objects under the directory ``keep``
    (as ``symbol (object path:0)``)."""
    stacks: collections.Counter[str] = collections.Counter()
    for block in text.split("\n\n"):
        lines = [m for m in map(_PERF_LINE.match, block.splitlines()) if m]
        frames = []
        for i, line in enumerate(lines):
            sym, dso = line["sym"], line["dso"]
            if dso == "inlined":  # the object is on the next line of the same address
                nxt = next((n for n in lines[i + 1 :] if n["dso"] != "inlined"), None)
                dso = nxt["dso"] if nxt is not None and nxt["ip"] == line["ip"] else None
            m = _PERF_PY.match(sym)
            if m:
                frames.append(f"{m['func']} ({m['file']}:0)")
            elif keep and dso and dso.startswith(keep):
                frames.append(f"{sym.split('+0x', 1)[0]} ({dso}:0)")
        if lines:
            stacks[";".join(reversed(frames)) or "<no python frame> (?:0)"] += 1
    return "".join(f"{stack} {n}\n" for stack, n in stacks.items())


@contextmanager
def perf_record(pid: int, output: Path, keep: str | None = None) -> Iterator[None]:
    """Sample ``pid`` (started with :func:`perf_env`) with ``perf record`` for the block;
    its stacks, folded with the compiled frames of objects under ``keep``, land in ``output``."""
    data = output.with_suffix(".perf.data")
    injected = output.with_suffix(".jit.data")
    cmd = ["perf", "record", "-k", "1", "-F", str(PERF_RATE), "--call-graph", "dwarf,32768"]
    proc = subprocess.Popen(
        [*cmd, "-p", str(pid), "-o", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield
    finally:
        _, err = stop(proc, signal.SIGINT, 120)  # perf writes its data on SIGINT
    try:
        if not data.exists():
            raise RuntimeError(f"perf wrote no profile (exit {proc.returncode}): {err[-500:]}")
        subprocess.run(
            ["perf", "inject", "--jit", "-i", str(data), "-o", str(injected)],
            check=True,
            capture_output=True,
            timeout=600,
        )
        script = subprocess.run(
            ["perf", "script", "-F", "ip,sym,dso", "-i", str(injected)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        output.write_text(fold_perf_script(script.stdout, keep))
    finally:
        data.unlink(missing_ok=True)
        injected.unlink(missing_ok=True)
        for jitted in JIT_DIR.glob(f"jitted-{pid}-*.so"):
            jitted.unlink(missing_ok=True)


def remove_jit_dump(pid: int) -> None:
    """The jitdump file ``-X perf_jit`` wrote for process ``pid`` (once it has exited)."""
    (JIT_DIR / f"jit-{pid}.dump").unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listener_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` on this machine, or None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(f"socket:[{parts[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                return int(pid)
        except OSError:
            continue
    return None


# -- in the service process ----------------------------------------------------------------


class Counters:
    """Produce requests, batches, records, loop iterations and timers, counted in the service."""

    def __init__(self) -> None:
        self.values: collections.Counter[str] = collections.Counter()

    def install(self, impl: str) -> None:
        """Wrap the per-request send method of ``impl`` and the loop's iteration and timers."""
        values = self.values
        if impl == "aioproducer":
            from aioproducer.engine.request_writer import RequestWriter

            write = RequestWriter._write

            def counted_write(self: Any, conn: Any, batches: Any) -> None:
                values["requests"] += 1
                values["batches"] += len(batches)
                values["records"] += sum(b.record_count for b in batches)
                write(self, conn, batches)

            RequestWriter._write = counted_write  # type: ignore[method-assign]
        else:
            from aiokafka.producer.sender import (  # type: ignore[import-untyped]
                SendProduceReqHandler,
            )

            create = SendProduceReqHandler.create_request

            def counted_create(self: Any) -> Any:  # once per request, retries included
                batches = self._batches
                values["requests"] += 1
                values["batches"] += len(batches)
                values["records"] += sum(b.record_count for b in batches.values())
                return create(self)

            SendProduceReqHandler.create_request = counted_create
        base = asyncio.base_events.BaseEventLoop
        run_once, call_at = base._run_once, base.call_at  # type: ignore[attr-defined]

        def counted_run_once(self: Any) -> None:
            values["loop_iterations"] += 1
            run_once(self)

        def counted_call_at(self: Any, *args: Any, **kwargs: Any) -> Any:
            values["timers"] += 1
            return call_at(self, *args, **kwargs)

        base._run_once = counted_run_once  # type: ignore[attr-defined]
        base.call_at = counted_call_at  # type: ignore[method-assign,assignment]

    def report(self) -> str:
        return STATS_PREFIX + json.dumps(dict(self.values))


class CpuSampler:
    """Stacks sampled on the process's CPU time (``ITIMER_PROF``), in the main thread."""

    def __init__(self, rate: int = PY_SPY_RATE) -> None:
        self.rate = rate
        self.stacks: collections.Counter[tuple[types.CodeType, ...]] = collections.Counter()

    def _sample(self, signum: int, frame: types.FrameType | None) -> None:
        codes = []
        while frame is not None:
            codes.append(frame.f_code)
            frame = frame.f_back
        self.stacks[tuple(codes)] += 1

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, 1 / self.rate, 1 / self.rate)

    def stop(self, output: Path) -> None:
        """Stop sampling and write the stacks as py-spy's raw format does (root first)."""
        signal.setitimer(signal.ITIMER_PROF, 0)
        lines = []
        for codes, n in self.stacks.items():
            frames = ";".join(
                f"{c.co_qualname} ({c.co_filename}:{c.co_firstlineno})" for c in reversed(codes)
            )
            lines.append(f"{frames} {n}")
        output.write_text("\n".join(lines) + "\n")


def read_stats(stdout: str) -> dict[str, int]:
    """The counters a service printed on its way out ({} if none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(STATS_PREFIX):
            return dict(json.loads(line[len(STATS_PREFIX) :]))
    return {}


def _shares_line(what: str, sh: dict[str, float], samples: int) -> str:
    return (
        f"{what}: producer {sh['producer']:.1%} (inclusive) aiohttp {sh['aiohttp']:.1%} "
        f"asyncio {sh['asyncio']:.1%} json/handler {sh['json/handler']:.1%} "
        f"other {sh['other']:.1%} of {samples} samples"
    )


def describe(run: dict[str, Any]) -> str:
    """One line of a profiled run's figures."""
    p = run.get("profile")
    if not p:
        return ""
    ok = max(run["ok"], 1)
    sh = p["shares"]
    parts = [_shares_line("py-spy", sh, p["samples"])]
    if p.get("cpu_shares"):
        parts.append(_shares_line("on CPU", p["cpu_shares"], p["cpu_samples"]))
    if p.get("perf_shares"):
        parts.append(_shares_line("perf", p["perf_shares"], p["perf_samples"]))
    cpu = p["cpu_s"]
    parts.append(
        "CPU us/request: "
        + " ".join(f"{k} {v / ok * 1e6:.0f}" for k, v in cpu.items() if v is not None)
    )
    st = p.get("stats") or {}
    if st.get("requests"):
        parts.append(
            f"Produce requests {st['requests']} ({st['requests'] / run['elapsed_s']:.0f}/s), "
            f"{st['records'] / st['requests']:.1f} records and "
            f"{st['batches'] / st['requests']:.2f} batches per request; "
            f"loop iterations/request {st.get('loop_iterations', 0) / ok:.2f}, "
            f"timers/request {st.get('timers', 0) / ok:.2f}"
        )
    return "\n    ".join(parts)
