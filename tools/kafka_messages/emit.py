"""Python source for one API's request and response, from their specs.

Each struct becomes a slotted dataclass; each (struct, version) pair an
encoder and a decoder written out straight (identical ones shared between
versions). Semantics follow Kafka's ``MessageDataGenerator``: a field a version
lacks must hold its default when written unless the spec marks it
``ignorable`` (then it is dropped); a tagged field (KIP-482) is written only
when it differs from its default; unknown tags are skipped when read.
"""

from __future__ import annotations

import textwrap

from .emit_code import (
    Module,
    annotation,
    decoder,
    default_value,
    encoder,
    has_records,
    snake,
)
from .spec import MessageSpec, StructSpec, Versions

__all__ = ["emit_module", "snake"]

# -- classes ----------------------------------------------------------------


def _wrap_comment(text: str, ind: str) -> list[str]:
    return [f"{ind}#: {line}" for line in textwrap.wrap(text, 96 - len(ind))] or []


def _class(struct: StructSpec, msg: MessageSpec, mod: Module, root: bool) -> str:
    cls = mod.class_names[id(struct)]
    what = (
        f"{msg.name} (Kafka's ``{msg.name}Data``)" if root else f"A ``{struct.name}`` of {msg.name}"
    )
    lines = ["@dataclass(slots=True)", f"class {cls}:", f'    """{what}."""', ""]
    if root:
        flex_from = msg.flexible.low if not msg.flexible.empty else 32767
        lines += [
            f"    API_KEY: ClassVar[int] = {msg.api_key}",
            f"    MIN_VERSION: ClassVar[int] = {msg.valid.low}",
            f"    MAX_VERSION: ClassVar[int] = {msg.valid.high}",
            f"    FLEXIBLE_FROM: ClassVar[int] = {flex_from}",
            "",
        ]
    for f in struct.fields:
        lines += _wrap_comment(f"{f.about} (v{_vrange(f.versions)})", "    ")
        default = default_value(f, mod)
        if default == "[]":
            value = "field(default_factory=list)"
        elif default.endswith("()"):
            value = f"field(default_factory={default[:-2]})"
        else:
            value = default
        lines.append(f"    {snake(f.name)}: {annotation(f, mod)} = {value}")
    if root:
        lines += _root_methods(cls)
        if has_records(struct):
            lines += _chunk_method(cls)
    return "\n".join(lines)


def _vrange(v: Versions) -> str:
    return f"{v.low}+" if v.high >= 1 << 15 else f"{v.low}-{v.high}"


def _root_methods(cls: str) -> list[str]:
    table = f"_{snake(cls).upper()}"
    return f'''
    def encode(self, version: int) -> bytes:
        """The body of this message at ``version``."""
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append the body at ``version`` to ``out`` (unchanged when this raises).

        Raises:
            UnsupportedVersionError: no such version, or a field it lacks is set.
            MessageError: a value does not fit its field.
        """
        encoder = {table}_ENCODERS.get(version)
        if encoder is None:
            raise UnsupportedVersionError(f"{cls} has no version {{version}}")
        start = len(out)
        try:
            encoder(self, out)
        except MessageError:
            del out[start:]
            raise
        except (struct.error, TypeError, AttributeError, UnicodeError, OverflowError) as exc:
            del out[start:]
            raise MessageError(f"{cls} v{{version}}: {{exc}}") from None

    @classmethod
    def decode(cls, buf: Buffer, version: int) -> {cls}:
        """The message at ``version`` that is all of ``buf``."""
        message, pos = cls.decode_from(buf, 0, version)
        if pos != len(buf):
            raise MessageError(f"{cls} v{{version}}: {{len(buf) - pos}} trailing bytes")
        return message

    @classmethod
    def decode_from(cls, buf: Buffer, pos: int, version: int) -> tuple[{cls}, int]:
        """The message at ``version`` starting at ``buf[pos]``, and where it ends."""
        decoder = {table}_DECODERS.get(version)
        if decoder is None:
            raise UnsupportedVersionError(f"{cls} has no version {{version}}")
        try:
            return decoder(buf, pos)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise MessageError(f"{cls} v{{version}}: {{exc}}") from None'''.split("\n")


def _chunk_method(cls: str) -> list[str]:
    table = f"_{snake(cls).upper()}"
    return f'''
    def encode_chunks(self, out: bytearray, version: int) -> list[Buffer]:
        """Append the body at ``version`` to ``out``; return the buffers to write in order.

        The first is ``out``; each record set follows as the very buffer this
        message holds (not copied), then a fresh buffer with what comes after
        it. The caller must not change those buffers until they are written.
        ``out`` is unchanged when this raises (see :meth:`encode_into`).
        """
        encoder = {table}_CHUNK_ENCODERS.get(version)
        if encoder is None:
            raise UnsupportedVersionError(f"{cls} has no version {{version}}")
        start = len(out)
        chunks: list[Buffer] = [out]
        try:
            encoder(self, out, chunks)
        except MessageError:
            del out[start:]
            raise
        except (struct.error, TypeError, AttributeError, UnicodeError, OverflowError) as exc:
            del out[start:]
            raise MessageError(f"{cls} v{{version}}: {{exc}}") from None
        return chunks'''.split("\n")


def _reachable(msg: MessageSpec) -> dict[int, set[int]]:
    """id(struct) -> the versions in which it can occur."""
    seen: dict[int, set[int]] = {}

    def walk(struct: StructSpec, versions: set[int]) -> None:
        seen.setdefault(id(struct), set()).update(versions)
        for f in struct.fields:
            if f.struct is not None:
                walk(f.struct, {v for v in versions if v in f.versions})

    walk(msg.root, set(range(msg.valid.low, msg.valid.high + 1)))
    return seen


def _add_message(msg: MessageSpec, mod: Module, taken: set[str]) -> None:
    for struct in msg.structs:
        name = struct.name
        if name in taken:
            raise ValueError(f"struct name {name} is used twice in one module")
        taken.add(name)
        mod.class_names[id(struct)] = name
    reach = _reachable(msg)
    for struct in msg.structs:
        mod.classes.append(_class(struct, msg, mod, struct is msg.root))
        cls = mod.class_names[id(struct)]
        for version in sorted(reach.get(id(struct), ())):
            base = f"_{'{}'}_{snake(cls)}_v{version}"
            mod.enc[(cls, version)] = mod.add_function(
                base.format("e"), encoder(struct, msg, version, mod)
            )
            mod.dec[(cls, version)] = mod.add_function(
                base.format("d"), decoder(struct, msg, version, mod)
            )
            if has_records(struct):
                mod.chunk_enc[(cls, version)] = mod.add_function(
                    base.format("c"), encoder(struct, msg, version, mod, chunked=True)
                )


def emit_module(request: MessageSpec, response: MessageSpec, header: str) -> str:
    """The whole module for one API."""
    mod = Module()
    taken: set[str] = set()
    _add_message(request, mod, taken)
    _add_message(response, mod, taken)
    parts = [header.rstrip("\n")]
    body = "\n".join(mod.classes + mod.functions)
    std = ["import struct"] + (["import uuid"] if "uuid." in body else [])
    names = ["ZERO_UUID"] if "ZERO_UUID" in body else []
    names += ["Buffer", "MessageError", "UnsupportedVersionError"]
    parts.append(
        "from __future__ import annotations\n\n"
        + "\n".join(std)
        + "\nfrom collections.abc import Callable\n"
        f"from dataclasses import {'dataclass, field' if 'field(default_factory' in body else 'dataclass'}\n"
        "from typing import ClassVar\n\n"
        "from . import _wire as _w\n"
        f"from ._wire import {', '.join(names)}\n\n"
        f"__all__ = [{', '.join(repr(m.name) for m in (request, response))}]"
    )
    parts.append(
        "\n".join(
            f"{'_P_' + c.replace('?', 'o')} = struct.Struct('>{c}')" for c in sorted(mod.formats)
        )
    )
    parts += mod.classes
    parts += mod.functions
    for msg in (request, response):
        cls = msg.root.name
        table = f"_{snake(cls).upper()}"
        versions = range(msg.valid.low, msg.valid.high + 1)
        enc = "".join(f"    {v}: {mod.enc[(cls, v)]},\n" for v in versions)
        dec = "".join(f"    {v}: {mod.dec[(cls, v)]},\n" for v in versions)
        tables = (
            f"{table}_ENCODERS: dict[int, Callable[[{cls}, bytearray], None]] = {{\n{enc}}}\n"
            f"{table}_DECODERS: dict[int, Callable[[Buffer, int], tuple[{cls}, int]]] = "
            f"{{\n{dec}}}"
        )
        if has_records(msg.root):
            chunk = "".join(f"    {v}: {mod.chunk_enc[(cls, v)]},\n" for v in versions)
            tables += (
                f"\n{table}_CHUNK_ENCODERS: "
                f"dict[int, Callable[[{cls}, bytearray, list[Buffer]], bytearray]] = {{\n{chunk}}}"
            )
        parts.append(tables)
    return "\n\n\n".join(parts) + "\n"
