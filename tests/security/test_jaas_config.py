"""``sasl.jaas.config`` is read as Kafka's JaasConfig (java.io.StreamTokenizer) reads it.

Each row is a text and what Kafka makes of it: (module, control flag, options)
or a refusal. The expectations follow StreamTokenizer's rules as JaasConfig
configures them: both quote characters, escapes inside quotes, comments, a
case-insensitive control flag, a mandatory ``;``.
"""

from __future__ import annotations

import pytest

from aioproducer import errors
from aioproducer.config import config_from_properties
from aioproducer.net.jaas import JaasEntry, parse_jaas_entry
from aioproducer.net.security_properties import parse_jaas_config

M = "org.apache.kafka.common.security.plain.PlainLoginModule"
SECRET = "s3cret-Pa55word"

# username / password: the options PlainLoginModule carries, so each row also
# checks the producer arguments parse_jaas_config makes of it.
ACCEPTED = [
    (
        f'{M} required username="alice" password="pw";',
        ("required", {"username": "alice", "password": "pw"}),
    ),
    # The control flag is case-insensitive (LoginModuleControlFlag via toUpperCase).
    (f"{M} REQUIRED username=u;", ("required", {"username": "u"})),
    (f"{M} Optional username=u;", ("optional", {"username": "u"})),
    (f"{M} requisite;", ("requisite", {})),
    (f"{M} SUFFICIENT password=p;", ("sufficient", {"password": "p"})),
    # Single quotes quote as double quotes do; the other quote is plain inside.
    (f"{M} required username='single quoted';", ("required", {"username": "single quoted"})),
    (
        f"{M} required username='it\"s' password=\"it's\";",
        ("required", {"username": 'it"s', "password": "it's"}),
    ),
    # Escapes inside quotes are interpreted.
    (f'{M} required password="x\\ty";', ("required", {"password": "x\ty"})),
    (f'{M} required password="l1\\nl2\\\\ \\"q\\"";', ("required", {"password": 'l1\nl2\\ "q"'})),
    (f"{M} required password='\\r\\b\\f\\a\\v\\q';", ("required", {"password": "\r\b\f\x07\x0bq"})),
    (f'{M} required password="\\101\\60\\0z\\477";', ("required", {"password": "A0\x00z\x277"})),
    (f'{M} required password="";', ("required", {"password": ""})),
    # A bare word keeps its backslashes; ; = / " ' end it.
    (
        f"{M} required username=x\\ty password=p@ss:w.rd-#1;",
        ("required", {"username": "x\\ty", "password": "p@ss:w.rd-#1"}),
    ),
    (f"{M} required password=pässwörd\u00a0ﬁ😀;", ("required", {"password": "pässwörd\u00a0ﬁ😀"})),
    # White space and comments anywhere between tokens.
    (
        f'\n  {M}\t/* block */ required // line\n username = "u" /* x */ ;  ',
        ("required", {"username": "u"}),
    ),
    (f"{M} required username=u; // trailing comment", ("required", {"username": "u"})),
    # A lone "/" is a comment character too: the rest of the line is skipped.
    (f"{M} required username=u / password=p\n;", ("required", {"username": "u"})),
    # A line end closes an unterminated quoted value.
    (f'{M} required password="x\n;', ("required", {"password": "x"})),
    # Quoted module name, flag and key.
    (f'"{M}" "required" "username"="u" "k k"="v";', ("required", {"username": "u", "k k": "v"})),
    # The last of repeated keys wins (a HashMap).
    (f"{M} required password=1 password=2;", ("required", {"password": "2"})),
]

REFUSED = [
    ("", "login module not specified"),
    ("  /* only a comment */ ", "login module not specified"),
    (f"{M} required a=b", "not terminated by a semicolon"),
    (f"{M}", "control flag not specified"),
    (f"{M} maybe a=b;", "control flag"),
    (f"{M} a=b;", "control flag"),
    (f"{M} required a;", "value not specified for key 'a'"),
    (f"{M} required a=;", "value not specified for key 'a'"),
    (f"{M} required a b=c;", "value not specified for key 'a'"),
    (f'{M} required a="unterminated;', "not terminated by a semicolon"),
    (f"{M} required a=b /* unterminated", "not terminated by a semicolon"),
    (f"{M} required =b;", "expected an option name"),
    ("; a=b;", "class name not specified"),
    (f"{M} required a=b; {M} required c=d;", "contains 2 login modules, should be 1"),
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED, ids=range(len(ACCEPTED)))
def test_accepted_as_kafka_reads_it(text: str, expected: tuple[str, dict[str, str]]) -> None:
    flag, options = expected
    fields = {"username": "sasl_plain_username", "password": "sasl_plain_password"}
    assert parse_jaas_config(text) == {fields[k]: v for k, v in options.items() if k in fields}
    entry = parse_jaas_entry(text)
    assert entry == JaasEntry(M, flag, options)
    assert entry.options == options


@pytest.mark.parametrize(("text", "match"), REFUSED, ids=range(len(REFUSED)))
def test_refused_as_kafka_refuses_it(text: str, match: str) -> None:
    for parse in (parse_jaas_entry, parse_jaas_config):
        with pytest.raises(errors.ConfigurationError, match=match):
            parse(text)


def test_refusals_never_show_a_value() -> None:
    for text in (
        f'{M} required password="{SECRET}"',
        f'{M} password="{SECRET}";',
        f'{M} required password "{SECRET}";',
        f"{SECRET} required a=b; {M} required;",
    ):
        with pytest.raises(errors.ConfigurationError) as info:
            parse_jaas_config(text)
        assert SECRET not in str(info.value), text


def test_producer_arguments_from_the_kafka_syntax() -> None:
    text = (
        "org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED "
        "username='svc' password=\"tab\\there\";"
    )
    assert parse_jaas_config(text) == {
        "sasl_plain_username": "svc",
        "sasl_plain_password": "tab\there",
    }
    cfg = config_from_properties(
        {
            "bootstrap.servers": "h:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": text,
        }
    )
    assert (cfg.sasl_plain_username, cfg.sasl_plain_password) == ("svc", "tab\there")
