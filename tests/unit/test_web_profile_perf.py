"""benchmarks.web_profile's perf mode: perf's stacks folded and attributed as py-spy's are."""

from __future__ import annotations

import pytest

from benchmarks import web_profile

PKG = "/srv/app/aioproducer/"
KERNELS = f"{PKG}_speedups/_kernels.cpython-313-x86_64-linux-gnu.so"
LIBPY = "/py/lib/libpython3.13.so.1.0"
JIT = "/tmp/jitted-4242-7.so"

# Samples as `perf script -F ip,sym,dso` prints them after `perf inject --jit`
# (leaf first; a Python frame is a jitted `py::qualname:path` symbol; a frame
# inlined into the next line's function says "inlined" instead of its object).
SCRIPT = f"""
\t          109f71 gen_dealloc ({LIBPY})
\t           8cd93 _PyEval_EvalFrameDefault ({LIBPY})
\t              85 py::RequestHandler.finish_response:/venv/aiohttp/web_protocol.py ({JIT})
\t          2bc5f0 py_trampoline_evaluator ({LIBPY})
\t              85 py::Handle._run:/py/lib/asyncio/events.py ({JIT})

\t          133a9a murmur2_buffer (inlined)
\t          133a9a keyed_lane_append ({KERNELS})
\t              85 py::Producer.enqueue:{PKG}producer/facade.py+0x5 ({JIT})
\t          2bc5f0 py_trampoline_evaluator ({LIBPY})
\t              85 py::post_events:/repo/examples/aiohttp_service.py ({JIT})
\t              85 py::Handle._run:/py/lib/asyncio/events.py ({JIT})

\t          4a0000 do_syscall_64 ([kernel.kallsyms])
\t          4a0001 sock_sendmsg ([kernel.kallsyms])

\t          109f71 gen_dealloc ({LIBPY})
\t           8cd93 _PyEval_EvalFrameDefault ({LIBPY})
\t              85 py::RequestHandler.finish_response:/venv/aiohttp/web_protocol.py ({JIT})
\t              85 py::Handle._run:/py/lib/asyncio/events.py ({JIT})

\t           52100 _PyObject_Malloc ({LIBPY})
\t            7c10 metadata_of (inlined)
\t            7c10 handle_result ({KERNELS})
\t           8cd93 _PyEval_EvalFrameDefault ({LIBPY})
\t              85 py::post_events:/repo/examples/aiohttp_service.py ({JIT})
\t              85 py::Handle._run:/py/lib/asyncio/events.py ({JIT})

\t           8cd93 _PyEval_EvalFrameDefault ({LIBPY})
\t              85 py::_wait.<locals>._on_completion:/py/lib/asyncio/tasks.py ({JIT})
\t            9a00 outcome_run_callbacks ({KERNELS})
\t              85 py::Handle._run:/py/lib/asyncio/events.py ({JIT})

\t            3300 parser_feed_data (/venv/aiohttp/_http_parser.cpython-313-x86_64-linux-gnu.so)
\t              85 py::RequestHandler.data_received:/venv/aiohttp/web_protocol.py ({JIT})
"""


def test_perf_stacks_fold_to_python_and_the_packages_compiled_frames() -> None:
    folded = web_profile.fold_perf_script(SCRIPT, PKG)
    lines = sorted(folded.splitlines())
    events = "Handle._run (/py/lib/asyncio/events.py:0)"
    finish = "RequestHandler.finish_response (/venv/aiohttp/web_protocol.py:0)"
    handler = "post_events (/repo/examples/aiohttp_service.py:0)"
    enqueue = f"Producer.enqueue ({PKG}producer/facade.py:0)"
    # The inlined frame takes its object from the next line at the same address.
    lane = f"keyed_lane_append ({KERNELS}:0);murmur2_buffer ({KERNELS}:0)"
    result = f"handle_result ({KERNELS}:0);metadata_of ({KERNELS}:0)"
    callbacks = f"outcome_run_callbacks ({KERNELS}:0)"
    on_completion = "_wait.<locals>._on_completion (/py/lib/asyncio/tasks.py:0)"
    received = "RequestHandler.data_received (/venv/aiohttp/web_protocol.py:0)"
    assert lines == sorted(
        [
            "<no python frame> (?:0) 1",
            f"{events};{callbacks};{on_completion} 1",
            f"{events};{finish} 2",
            f"{events};{handler};{enqueue};{lane} 1",
            f"{events};{handler};{result} 1",
            f"{received} 1",  # another package's compiled frame is left out
        ]
    )
    # Without a directory to keep, only the Python frames.
    assert f"{events};{handler} 1" in web_profile.fold_perf_script(SCRIPT).splitlines()


def test_folded_perf_stacks_are_attributed_like_py_spy_ones() -> None:
    counts = web_profile.attribute(web_profile.fold_perf_script(SCRIPT, PKG), PKG)
    # A producer Python frame anywhere makes the sample the producer's, and so
    # does the package's compiled code innermost (handle_result called by the
    # handler); a done callback it calls back is the callback's (asyncio). Else
    # the innermost Python frame decides; a kernel-only sample is "other".
    assert counts == {"producer": 2, "aiohttp": 3, "asyncio": 1, "other": 1}


def test_perf_mode_names_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_profile.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(web_profile.sys, "version_info", (3, 12, 9))
    assert "CPython 3.13+" in (web_profile.perf_unavailable() or "")
    monkeypatch.setattr(web_profile.sys, "version_info", (3, 13, 0))
    assert web_profile.perf_unavailable() is None
    monkeypatch.setattr(web_profile.shutil, "which", lambda name: None)
    assert "Linux perf" in (web_profile.perf_unavailable() or "")
    assert web_profile.perf_env() == {"PYTHON_PERF_JIT_SUPPORT": "1"}
