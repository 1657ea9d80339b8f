"""Kafka's ``sasl.jaas.config`` syntax, read as Kafka reads it.

``<LoginModuleClass> <controlFlag> (<key>=<value>)*;``: Kafka's ``JaasConfig``
splits the text with ``java.io.StreamTokenizer`` configured so that

* characters 0-32 are white space; ``;`` and ``=`` are tokens of their own;
* ``"`` and ``'`` both quote a value: inside quotes ``\\t \\n \\r \\b \\f \\a \\v``,
  octal ``\\0``-``\\377`` and ``\\<any>`` (``\\"``, ``\\\\``) are escapes, and a
  line end or the end of the text also ends the quoted value;
* ``//`` and a lone ``/`` start a comment to the end of the line, ``/* */``
  a block comment;
* any other character from 33 up (except 129-159) belongs to a bare word,
  backslashes included;

and the control flag is matched case-insensitively (``REQUIRED`` works). Every
entry must end with ``;``, and a client's ``sasl.jaas.config`` holds exactly
one login module (``JaasContext``). :func:`parse_jaas_entry` follows those
rules; errors name what is wrong, never a value (values may be secrets).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigurationError

__all__ = ["CONTROL_FLAGS", "JaasEntry", "parse_jaas_entries", "parse_jaas_entry"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
_OCTAL = "01234567"


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a JAAS configuration."""

    module: str
    flag: str  # lower case, one of CONTROL_FLAGS
    options: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted", "char" or "eof"
    text: str = ""

    @property
    def value(self) -> str | None:
        """StreamTokenizer's ``sval``: the text of a word or a quoted string, else None."""
        return self.text if self.kind in ("word", "quoted") else None


_EOF = _Token("eof")


def _is_word_char(c: str) -> bool:
    code = ord(c)
    if code <= 32 or c in ";=/\"'":
        return False
    return code <= 128 or code >= 160


class _Tokenizer:
    """The subset of ``java.io.StreamTokenizer`` that ``JaasConfig`` configures."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def _read(self) -> str:
        """The next character, or "" at the end."""
        if self._pos >= len(self._text):
            return ""
        c = self._text[self._pos]
        self._pos += 1
        return c

    def _unread(self, c: str) -> None:
        if c:
            self._pos -= 1

    def next(self) -> _Token:
        while True:
            c = self._read()
            while c and ord(c) <= 32:
                c = self._read()
            if not c:
                return _EOF
            if _is_word_char(c):
                start = self._pos - 1
                while True:
                    d = self._read()
                    if not d or not _is_word_char(d):
                        self._unread(d)
                        break
                return _Token("word", self._text[start : self._pos])
            if c in "\"'":
                return self._quoted(c)
            if c == "/":
                if not self._comment():
                    return _EOF
                continue
            return _Token("char", c)

    def _comment(self) -> bool:
        """Skip a comment after ``/``; False if the text ended inside a block comment."""
        c = self._read()
        if c == "*":
            prev = ""
            while True:
                c = self._read()
                if not c:
                    return False
                if c == "/" and prev == "*":
                    return True
                prev = c
        # "//" or a lone "/" (a comment character): up to the end of the line.
        # As in StreamTokenizer, the character after a lone "/" is skipped unseen.
        while True:
            c = self._read()
            if not c or c in "\r\n":
                self._unread(c)
                return True

    def _quoted(self, quote: str) -> _Token:
        out: list[str] = []
        d = self._read()
        while d and d != quote and d not in "\r\n":
            if d != "\\":
                out.append(d)
                d = self._read()
                continue
            c = self._read()
            if c and c in _OCTAL:
                first, value = c, int(c)
                d = self._read()
                if d and d in _OCTAL:
                    value = value * 8 + int(d)
                    d = self._read()
                    if d and d in _OCTAL and first <= "3":
                        value = value * 8 + int(d)
                        d = self._read()
                out.append(chr(value))
                continue
            # A backslash at the very end stands for Java's (char) -1.
            out.append(_ESCAPES.get(c, c) if c else "\uffff")
            d = self._read()
        if d != quote:
            self._unread(d)  # a line end is white space for the next token
        return _Token("quoted", "".join(out))


def parse_jaas_entries(text: str) -> list[JaasEntry]:
    """Every login module of a JAAS configuration text, as Kafka's ``JaasConfig`` reads it."""
    tokens = _Tokenizer(text)
    entries: list[JaasEntry] = []
    token = tokens.next()
    while token is not _EOF:
        entries.append(_entry(tokens, token))
        token = tokens.next()
    if not entries:
        raise ConfigurationError("sasl.jaas.config: login module not specified")
    return entries


def parse_jaas_entry(text: str) -> JaasEntry:
    """The one login module of a client's ``sasl.jaas.config`` (Kafka's ``JaasContext`` rule)."""
    entries = parse_jaas_entries(text)
    if len(entries) != 1:
        raise ConfigurationError(
            f"sasl.jaas.config contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]


def _entry(tokens: _Tokenizer, first: _Token) -> JaasEntry:
    module = first.value
    if not module:
        raise ConfigurationError("sasl.jaas.config: login module class name not specified")
    token = tokens.next()
    if token is _EOF:
        raise ConfigurationError("sasl.jaas.config: login module control flag not specified")
    flag = (token.value or "").lower()
    if flag not in CONTROL_FLAGS:
        raise ConfigurationError(
            "sasl.jaas.config: the login module control flag (after the class name) must be "
            "required, requisite, sufficient or optional"
        )
    options: dict[str, str] = {}
    token = tokens.next()
    while token is not _EOF and token != _Token("char", ";"):
        key = token.value
        if key is None:
            raise ConfigurationError(
                f"sasl.jaas.config: expected an option name, found {token.text!r}"
            )
        value = None
        if tokens.next() == _Token("char", "="):
            value = tokens.next().value
        if value is None:
            raise ConfigurationError(f"sasl.jaas.config: value not specified for key {key!r}")
        options[key] = value
        token = tokens.next()
    if token is _EOF:
        raise ConfigurationError("sasl.jaas.config: entry not terminated by a semicolon")
    return JaasEntry(module, flag, options)
