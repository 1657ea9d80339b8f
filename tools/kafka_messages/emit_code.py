"""Per-version encoders and decoders of Kafka's message structs, written out straight.

The code half of :mod:`.emit`: for one (struct, version) pair, the Python
source of a function that writes or reads it field by field, following Kafka's
``MessageDataGenerator`` (flexible versions with compact types and tagged
fields, KIP-482; nullable fields; a field a version lacks).
"""

from __future__ import annotations

import keyword
import re

from .spec import FieldSpec, MessageSpec, StructSpec

__all__ = [
    "Module",
    "annotation",
    "decoder",
    "default_value",
    "encoder",
    "has_records",
    "snake",
]

_FIXED = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
}
_SIZES = {"?": 1, "b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8}
_PY = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "Buffer",
    "uuid": "uuid.UUID",
}


def snake(name: str) -> str:
    """``TransactionalId`` -> ``transactional_id``; ``V3AndBelowTopics`` -> ``v3_and_below_topics``."""
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return out + "_" if keyword.iskeyword(out) else out


class Module:
    """Accumulates one module's structs, codecs and struct formats."""

    def __init__(self) -> None:
        self.formats: set[str] = set()
        self.classes: list[str] = []
        self.functions: list[str] = []
        self.class_names: dict[int, str] = {}  # id(StructSpec) -> class name
        # (class name, version) -> the function that encodes/decodes it
        self.enc: dict[tuple[str, int], str] = {}
        # the same for structs holding records: encoders that leave them by reference
        self.chunk_enc: dict[tuple[str, int], str] = {}
        self.dec: dict[tuple[str, int], str] = {}
        self._bodies: dict[str, str] = {}

    def fmt(self, codes: str) -> str:
        self.formats.add(codes)
        return f"_P_{codes.replace('?', 'o')}"

    def add_function(self, name: str, body: str) -> str:
        """Register a function, or reuse an identical one; return its name."""
        key = body
        known = self._bodies.get(key)
        if known is not None:
            return known
        self._bodies[key] = name
        self.functions.append(body.replace("__NAME__", name))
        return name


def _flexible(spec: FieldSpec, msg: MessageSpec, version: int) -> bool:
    versions = spec.flexible if spec.flexible is not None else msg.flexible
    return version in versions


def _nullable_ever(f: FieldSpec) -> bool:
    return not f.nullable.empty or f.default == "null"


def annotation(f: FieldSpec, mod: Module) -> str:
    if f.struct is not None:
        inner = mod.class_names[id(f.struct)]
    else:
        inner = _PY[f.element]
    text = f"list[{inner}]" if f.is_array else inner
    if f.element == "records" and not f.is_array:
        return "Buffer | None"
    return f"{text} | None" if _nullable_ever(f) else text


def default_value(f: FieldSpec, mod: Module) -> str:
    """The default as an expression (a fresh object each time it is evaluated)."""
    raw = f.default
    if raw == "null":
        return "None"
    if f.is_array:
        return "[]"
    if f.struct is not None:
        return f"{mod.class_names[id(f.struct)]}()"
    t = f.type
    if t == "bool":
        return "True" if raw is True or str(raw).lower() == "true" else "False"
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return str(int(str(raw), 0)) if raw not in (None, "") else "0"
    if t == "float64":
        return repr(float(str(raw))) if raw not in (None, "") else "0.0"
    if t == "string":
        return repr(str(raw)) if raw is not None else "''"
    if t == "bytes":
        return "b''"
    if t == "records":
        return "None"
    if t == "uuid":
        return "ZERO_UUID"
    raise ValueError(f"no default for {f.name}: {t}")


def _non_default(f: FieldSpec, value: str, mod: Module) -> str:
    default = default_value(f, mod)
    if default == "None":
        return f"{value} is not None"
    return f"{value} != {default}"


# -- encoders ---------------------------------------------------------------
#
# A struct that holds record sets (Produce's) also gets a chunk encoder,
# ``(m, out, chunks)``: it appends to ``out`` (the last of ``chunks``), puts
# each record set in ``chunks`` by reference followed by a fresh buffer for
# what comes after, and returns the buffer last written.
# Written with ``writelines`` the records are copied once, into the socket's
# buffer, not into a request buffer that grows batch by batch (Java's
# ``SendBuilder`` does the same with zero-copy record buffers).


def has_records(struct: StructSpec) -> bool:
    """Whether ``struct`` holds a record set, itself or in a struct it holds."""
    return any(
        f.element == "records" or (f.struct is not None and has_records(f.struct))
        for f in struct.fields
    )


def _enc_value(
    f: FieldSpec,
    value: str,
    out: str,
    version: int,
    flex: bool,
    mod: Module,
    ind: str,
    chunked: bool = False,
) -> list[str]:
    """Lines writing ``value`` (a field of type ``f``) to ``out``."""
    nullable = version in f.nullable
    if f.is_array:
        arr = f"a_{snake(f.name)}"
        lines = [f"{ind}{arr} = {value}"]
        null = "out.append(0)" if flex else "out += b'\\xff\\xff\\xff\\xff'"
        null = null.replace("out", out)
        body_ind = ind
        if not nullable and _nullable_ever(f):
            lines += [
                f"{ind}if {arr} is None:",
                f"{ind}    raise MessageError('{snake(f.name)} is not nullable in version {version}')",
            ]
        if nullable:
            lines += [f"{ind}if {arr} is None:", f"{ind}    {null}", f"{ind}else:"]
            body_ind = ind + "    "
        prefix = f"_w.uvarint(len({arr}) + 1)" if flex else f"_w.I32.pack(len({arr}))"
        lines.append(f"{body_ind}{out} += {prefix}")
        elem = f.element
        e = f"e_{snake(f.name)}"
        if elem in _FIXED:
            lines.append(
                f"{body_ind}{out} += struct.pack(f'>{{len({arr})}}{_FIXED[elem]}', *{arr})"
            )
        else:
            lines.append(f"{body_ind}for {e} in {arr}:")
            lines += _enc_scalar(f, e, out, version, flex, mod, body_ind + "    ", False, chunked)
        return lines
    return _enc_scalar(f, value, out, version, flex, mod, ind, nullable, chunked)


def _enc_scalar(
    f: FieldSpec,
    value: str,
    out: str,
    version: int,
    flex: bool,
    mod: Module,
    ind: str,
    nullable: bool,
    chunked: bool = False,
) -> list[str]:
    elem = f.element
    flag = "True" if nullable else "False"
    if chunked and f.struct is not None and has_records(f.struct):
        if nullable:
            raise ValueError(f"{f.name}: a nullable struct holding records is not supported")
        fn = mod.chunk_enc[(mod.class_names[id(f.struct)], version)]
        return [f"{ind}{out} = {fn}({value}, {out}, chunks)"]
    if chunked and elem == "records":
        null = f"{out}.append(0)" if flex else f"{out} += b'\\xff\\xff\\xff\\xff'"
        prefix = f"_w.uvarint(len({value}) + 1)" if flex else f"_w.I32.pack(len({value}))"
        lines = [f"{ind}if {value} is None:"]
        if nullable:
            lines.append(f"{ind}    {null}")
        else:
            lines.append(f"{ind}    raise MessageError('a non-nullable record set is None')")
        return lines + [
            f"{ind}else:",
            f"{ind}    {out} += {prefix}",
            f"{ind}    memoryview({value})  # a buffer, or TypeError",
            f"{ind}    chunks.append({value})",
            f"{ind}    {out} = bytearray()",
            f"{ind}    chunks.append({out})",
        ]
    if f.struct is not None:
        fn = mod.enc[(mod.class_names[id(f.struct)], version)]
        if nullable:
            return [
                f"{ind}if {value} is None:",
                f"{ind}    {out} += b'\\xff'",
                f"{ind}else:",
                f"{ind}    {out} += b'\\x01'",
                f"{ind}    {fn}({value}, {out})",
            ]
        return [f"{ind}{fn}({value}, {out})"]
    if elem == "string":
        return [f"{ind}_w.{'w_cstr' if flex else 'w_str'}({out}, {value}, {flag})"]
    if elem in ("bytes", "records"):
        return [f"{ind}_w.{'w_cbytes' if flex else 'w_bytes'}({out}, {value}, {flag})"]
    if elem == "uuid":
        return [f"{ind}{out} += {value}.bytes"]
    if elem in _FIXED:
        return [f"{ind}{out} += {mod.fmt(_FIXED[elem])}.pack({value})"]
    raise ValueError(f"cannot encode {f.type}")


def encoder(
    struct: StructSpec, msg: MessageSpec, version: int, mod: Module, chunked: bool = False
) -> str:
    cls = mod.class_names[id(struct)]
    flex = version in msg.flexible
    lines: list[str] = []
    group: list[FieldSpec] = []

    def flush() -> None:
        if group:
            codes = "".join(_FIXED[g.type] for g in group)
            args = ", ".join(f"m.{snake(g.name)}" for g in group)
            lines.append(f"    out += {mod.fmt(codes)}.pack({args})")
            group.clear()

    tagged: list[FieldSpec] = []
    for f in struct.fields:
        attr = f"m.{snake(f.name)}"
        if version not in f.versions:
            if not f.ignorable:
                flush()
                lines += [
                    f"    if {_non_default(f, attr, mod)}:",
                    "        raise UnsupportedVersionError(",
                    f"            'cannot write a non-default {snake(f.name)} at version {version}'",
                    "        )",
                ]
            continue
        if version in f.tagged:
            tagged.append(f)
            continue
        if f.type in _FIXED:
            group.append(f)
            continue
        flush()
        lines += _enc_value(
            f, attr, "out", version, _flexible(f, msg, version), mod, "    ", chunked
        )
    flush()
    if flex:
        if not tagged:
            lines.append("    out.append(0)  # no tagged fields")
        else:
            if chunked and any(
                t.element == "records" or t.struct is not None and has_records(t.struct)
                for t in tagged
            ):
                raise ValueError(f"{struct.name}: a tagged field holding records is not supported")
            tagged.sort(key=lambda t: t.tag or 0)
            checks = []
            for f in tagged:
                t = f"t_{snake(f.name)}"
                lines.append(f"    {t} = {_non_default(f, f'm.{snake(f.name)}', mod)}")
                checks.append(t)
            lines.append(f"    out += _w.uvarint({' + '.join(checks)})")
            for f in tagged:
                lines += [
                    f"    if t_{snake(f.name)}:",
                    "        tag = bytearray()",
                    *_enc_value(f, f"m.{snake(f.name)}", "tag", version, True, mod, "        "),
                    f"        out += _w.uvarint({f.tag})",
                    "        out += _w.uvarint(len(tag))",
                    "        out += tag",
                ]
    if not lines:
        lines.append("    pass")
    if chunked:
        head = f"def __NAME__(m: {cls}, out: bytearray, chunks: list[Buffer]) -> bytearray:"
        return "\n".join([head, *[ln for ln in lines if ln != "    pass"], "    return out"])
    head = f"def __NAME__(m: {cls}, out: bytearray) -> None:"
    return "\n".join([head, *lines])


# -- decoders ---------------------------------------------------------------


def _dec_value(
    f: FieldSpec,
    var: str,
    pos: str,
    version: int,
    flex: bool,
    mod: Module,
    ind: str,
    declare: bool,
) -> list[str]:
    """Lines reading a value of field ``f`` into ``var``, advancing ``pos``."""
    nullable = version in f.nullable
    if not f.is_array:
        return _dec_scalar(f, var, pos, version, flex, mod, ind, nullable, declare)
    n = f"n_{snake(f.name)}"
    typ = annotation(f, mod)
    if flex:
        # A count below 127 is one byte: read it without a call.
        lines = [
            f"{ind}{n} = buf[{pos}] - 1",
            f"{ind}if {n} < 127 and {n} <= len(buf) - {pos} - 1:",
            f"{ind}    {pos} += 1",
            f"{ind}else:",
            f"{ind}    {n}, {pos} = _w.r_array_len(buf, {pos}, True)",
        ]
    else:
        lines = [f"{ind}{n}, {pos} = _w.r_array_len(buf, {pos}, False)"]
    if declare:
        lines.append(f"{ind}{var}: {typ}")
    lines.append(f"{ind}if {n} < 0:")
    if nullable:
        lines.append(f"{ind}    {var} = None")
    else:
        lines.append(f"{ind}    raise MessageError('non-nullable field {snake(f.name)} was null')")
    lines.append(f"{ind}else:")
    elem = f.element
    if elem in _FIXED:
        code = _FIXED[elem]
        lines += [
            f"{ind}    {var} = list(struct.unpack_from(f'>{{{n}}}{code}', buf, {pos}))",
            f"{ind}    {pos} += {_SIZES[code]} * {n}",
        ]
        return lines
    e = f"e_{snake(f.name)}"
    inner = annotation(f, mod)[5:].split("]")[0]
    lines += [f"{ind}    {var} = []", f"{ind}    for _ in range({n}):"]
    lines += _dec_scalar(f, e, pos, version, flex, mod, ind + "        ", False, False, inner)
    lines.append(f"{ind}        {var}.append({e})")
    return lines


def _dec_scalar(
    f: FieldSpec,
    var: str,
    pos: str,
    version: int,
    flex: bool,
    mod: Module,
    ind: str,
    nullable: bool,
    declare: bool,
    typ: str | None = None,
) -> list[str]:
    elem = f.element
    name = snake(f.name)
    if f.struct is not None:
        fn = mod.dec[(mod.class_names[id(f.struct)], version)]
        if nullable:
            lines = [f"{ind}{var}: {annotation(f, mod)}"] if declare else []
            return lines + [
                f"{ind}if _w.I8.unpack_from(buf, {pos})[0] < 0:",
                f"{ind}    {var} = None",
                f"{ind}    {pos} += 1",
                f"{ind}else:",
                f"{ind}    {var}, {pos} = {fn}(buf, {pos} + 1)",
            ]
        return [f"{ind}{var}, {pos} = {fn}(buf, {pos})"]
    if elem == "string" and flex:
        # Null and short strings (length byte below 0x80) are read without a call.
        n = f"l_{name}"
        if nullable:
            null = [f"{ind}    {var} = None", f"{ind}    {pos} += 1"]
            slow = [f"{ind}    {var}, {pos} = _w.r_cstr(buf, {pos})"]
        else:
            null = [f"{ind}    raise MessageError('non-nullable field {name} was null')"]
            slow = [
                f"{ind}    s_{name}, {pos} = _w.r_cstr(buf, {pos})",
                f"{ind}    if s_{name} is None:",
                f"{ind}        raise MessageError('non-nullable field {name} was null')",
                f"{ind}    {var} = s_{name}",
            ]
        return [
            f"{ind}{n} = buf[{pos}]",
            f"{ind}if {n} == 0:",
            *null,
            f"{ind}elif {n} < 0x80 and {pos} + {n} <= len(buf):",
            f"{ind}    {var} = str(buf[{pos} + 1 : {pos} + {n}], 'utf-8')",
            f"{ind}    {pos} += {n}",
            f"{ind}else:",
            *slow,
        ]
    if elem in ("string", "bytes", "records"):
        if elem == "string":
            reader = "r_cstr" if flex else "r_str"
        else:
            reader = "r_cbytes" if flex else "r_bytes"
        lines = [f"{ind}{var}, {pos} = _w.{reader}(buf, {pos})"]
        if not nullable:
            lines += [
                f"{ind}if {var} is None:",
                f"{ind}    raise MessageError('non-nullable field {name} was null')",
            ]
        return lines
    if elem == "uuid":
        return [f"{ind}{var}, {pos} = _w.r_uuid(buf, {pos})"]
    if elem in _FIXED:
        code = _FIXED[elem]
        return [
            f"{ind}{var} = {mod.fmt(code)}.unpack_from(buf, {pos})[0]",
            f"{ind}{pos} += {_SIZES[code]}",
        ]
    raise ValueError(f"cannot decode {f.type}")


def decoder(struct: StructSpec, msg: MessageSpec, version: int, mod: Module) -> str:
    cls = mod.class_names[id(struct)]
    flex = version in msg.flexible
    lines: list[str] = []
    args: list[str] = []
    group: list[FieldSpec] = []

    def flush() -> None:
        if group:
            codes = "".join(_FIXED[g.type] for g in group)
            names = ", ".join(f"f_{snake(g.name)}" for g in group)
            trailing = "," if len(group) == 1 else ""
            lines.append(f"    {names}{trailing} = {mod.fmt(codes)}.unpack_from(buf, pos)")
            lines.append(f"    pos += {sum(_SIZES[c] for c in codes)}")
            group.clear()

    tagged: list[FieldSpec] = []
    for f in struct.fields:
        var = f"f_{snake(f.name)}"
        if version not in f.versions:
            args.append(default_value(f, mod))
            continue
        args.append(var)
        if version in f.tagged:
            tagged.append(f)
            continue
        if f.type in _FIXED:
            group.append(f)
            continue
        flush()
        lines += _dec_value(f, var, "pos", version, _flexible(f, msg, version), mod, "    ", True)
    flush()
    if flex:
        # Most sections are empty (one zero byte): read that without a call.
        lines += ["    if buf[pos] == 0:", "        pos += 1", "    else:"]
        if not tagged:
            lines.append("        pos = _w.skip_tags(buf, pos)")
        else:
            for f in tagged:
                lines.insert(
                    len(lines) - 3,
                    f"    f_{snake(f.name)}: {annotation(f, mod)} = {default_value(f, mod)}",
                )
            lines += [
                "        n_tags, pos = _w.r_uvarint(buf, pos)",
                "        for _ in range(n_tags):",
                "            tag, pos = _w.r_uvarint(buf, pos)",
                "            size, pos = _w.r_uvarint(buf, pos)",
                "            end = pos + size",
                "            if end > len(buf):",
                "                raise MessageError('buffer ends inside a tagged field')",
            ]
            for i, f in enumerate(sorted(tagged, key=lambda t: t.tag or 0)):
                kw = "if" if i == 0 else "elif"
                lines.append(f"            {kw} tag == {f.tag}:")
                lines += _dec_value(
                    f, f"f_{snake(f.name)}", "pos", version, True, mod, " " * 16, False
                )
                lines += [
                    "                if pos != end:",
                    (
                        f"                    raise MessageError('tagged field {snake(f.name)} "
                        "is not the size its header says')"
                    ),
                ]
            lines.append("            pos = end")
    call = f"{cls}({', '.join(args)})"
    if len(call) > 80:
        call = f"{cls}(\n" + "".join(f"        {a},\n" for a in args) + "    )"
    lines.append(f"    return {call}, pos")
    head = f"def __NAME__(buf: Buffer, pos: int) -> tuple[{cls}, int]:"
    return "\n".join([head, *lines])
