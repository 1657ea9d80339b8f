"""protocol/ is sans-I/O: bytes in, objects out, no sockets, loops or clocks."""

from __future__ import annotations

import ast
import pathlib

from aioproducer import protocol

FORBIDDEN = {"asyncio", "socket", "ssl", "time", "selectors"}


def test_protocol_imports_no_io_module() -> None:
    root = pathlib.Path(protocol.__file__).parent
    offenders = []
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [(path.name, n) for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
    assert len(list(root.glob("*.py"))) >= 6
