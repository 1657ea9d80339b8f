"""benchmarks.web_profile's perf mode: perf's stacks folded and attributed as py-spy's are."""

from __future__ import annotations

import pytest

from benchmarks import web_profile

PKG = "/srv/app/aioproducer/"

# Three samples as `perf script -F ip,sym` prints them after `perf inject --jit`
# (leaf first; a Python frame is a jitted `py::qualname:path` symbol).
SCRIPT = f"""
\t          109f71 gen_dealloc
\t           8cd93 _PyEval_EvalFrameDefault
\t              85 py::RequestHandler.finish_response:/venv/aiohttp/web_protocol.py
\t          2bc5f0 py_trampoline_evaluator
\t              85 py::Handle._run:/py/lib/asyncio/events.py

\t          133a9a murmur2_buffer
\t          133a00 keyed_lane_append
\t              85 py::Producer.enqueue:{PKG}producer/facade.py+0x5
\t          2bc5f0 py_trampoline_evaluator
\t              85 py::post_events:/repo/examples/aiohttp_service.py
\t              85 py::Handle._run:/py/lib/asyncio/events.py

\t          4a0000 do_syscall_64
\t          4a0001 sock_sendmsg

\t          109f71 gen_dealloc
\t           8cd93 _PyEval_EvalFrameDefault
\t              85 py::RequestHandler.finish_response:/venv/aiohttp/web_protocol.py
\t              85 py::Handle._run:/py/lib/asyncio/events.py
"""


def test_perf_stacks_fold_to_python_frames_root_first() -> None:
    folded = web_profile.fold_perf_script(SCRIPT)
    lines = sorted(folded.splitlines())
    events = "Handle._run (/py/lib/asyncio/events.py:0)"
    finish = "RequestHandler.finish_response (/venv/aiohttp/web_protocol.py:0)"
    handler = "post_events (/repo/examples/aiohttp_service.py:0)"
    enqueue = f"Producer.enqueue ({PKG}producer/facade.py:0)"
    assert lines == [
        "<no python frame> (?:0) 1",
        f"{events};{finish} 2",
        f"{events};{handler};{enqueue} 1",
    ]


def test_folded_perf_stacks_are_attributed_like_py_spy_ones() -> None:
    counts = web_profile.attribute(web_profile.fold_perf_script(SCRIPT), PKG)
    # A sample with a producer frame anywhere is the producer's; else its
    # innermost frame decides; a kernel-only sample is "other".
    assert counts == {"producer": 1, "aiohttp": 2, "other": 1}


def test_perf_mode_names_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_profile.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(web_profile.sys, "version_info", (3, 12, 9))
    assert "CPython 3.13+" in (web_profile.perf_unavailable() or "")
    monkeypatch.setattr(web_profile.sys, "version_info", (3, 13, 0))
    assert web_profile.perf_unavailable() is None
    monkeypatch.setattr(web_profile.shutil, "which", lambda name: None)
    assert "Linux perf" in (web_profile.perf_unavailable() or "")
    assert web_profile.perf_env() == {"PYTHON_PERF_JIT_SUPPORT": "1"}
