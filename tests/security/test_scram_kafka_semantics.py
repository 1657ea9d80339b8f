"""SCRAM as Kafka does it: raw UTF-8 password bytes, no SASLprep; user names only escaped.

Kafka's ScramFormatter.normalize is ``getBytes(UTF_8)`` and its broker derives
stored credentials the same way, so a password with a no-break space, a
ligature or an emoji must log in unchanged. The mock broker derives its
credentials from the raw bytes as Kafka's does; the client-final message for
a fixed nonce and server-first message is checked against RFC 5802 computed
here with hashlib/hmac, and against RFC 7677's published example.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

import pytest

from aioproducer import Producer, RecordMetadata, errors
from aioproducer.sasl.scram import ScramExchange
from aioproducer.testing import MockCluster
from tests.support.aio import within

PASSWORDS = {
    "plain": "alice-Secret-1",
    "no-break-space": "pass\u00a0word",
    "ligature": "\ufb01sh-password",  # "ﬁ", NFKC: "fi"
    "emoji": "correct horse \U0001f40e battery",
    "combining": "cafe\u0301",  # NFC would compose "é"
}
USERS = {
    "plain": "alice",
    "escaped": "a=b,c",  # sent as a=3Db=2Cc
    "ligature-user": "\ufb01nance",
}
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def rfc5802_client_final(
    mechanism: str, password: str, client_first_bare: str, server_first: str
) -> tuple[str, str]:
    """(client-final, server-final) per RFC 5802 section 3, hashing the raw UTF-8 password."""
    name = HASHES[mechanism]
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        name, password.encode("utf-8"), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    signature = hmac.new(stored_key, auth, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_key = hmac.new(salted, b"Server Key", name).digest()
    server_signature = hmac.new(server_key, auth, name).digest()
    return (
        f"{without_proof},p={base64.b64encode(proof).decode()}",
        f"v={base64.b64encode(server_signature).decode()}",
    )


@pytest.mark.parametrize("mechanism", HASHES)
@pytest.mark.parametrize("password", PASSWORDS.values(), ids=PASSWORDS.keys())
def test_client_final_is_rfc5802_over_the_raw_password(mechanism: str, password: str) -> None:
    nonce = "fyko+d2lbbFgONRv9qkxdawL"
    exchange = ScramExchange(mechanism, "user", password, nonce=nonce)
    first = asyncio.run(exchange.first())
    assert first == f"n,,n=user,r={nonce}".encode()
    salt = base64.b64encode(b"QSXCR+Q6sek8bf92").decode()
    server_first = f"r={nonce}3rfcNHYJY1ZVvWVs7j,s={salt},i=4096"
    expected_final, server_final = rfc5802_client_final(
        mechanism, password, f"n=user,r={nonce}", server_first
    )
    assert asyncio.run(exchange.step(server_first.encode())) == expected_final.encode()
    assert asyncio.run(exchange.step(server_final.encode())) is None


def test_rfc7677_example() -> None:
    # RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil".
    exchange = ScramExchange("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert asyncio.run(exchange.first()) == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert asyncio.run(exchange.step(server_first)) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert asyncio.run(exchange.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")) is None


def test_user_names_are_escaped_not_normalised() -> None:
    exchange = ScramExchange("SCRAM-SHA-256", "\ufb01=a,b", "pw", nonce="n0nce")
    assert asyncio.run(exchange.first()) == "n,,n=\ufb01=3Da=2Cb,r=n0nce".encode()


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", HASHES)
@pytest.mark.parametrize(
    ("user", "password"),
    [
        *((USERS["plain"], p) for p in PASSWORDS.values()),
        (USERS["escaped"], PASSWORDS["ligature"]),
        (USERS["ligature-user"], PASSWORDS["emoji"]),
    ],
    ids=[*PASSWORDS.keys(), "escaped-user", "ligature-user"],
)
async def test_producer_logs_in_with_kafkas_raw_credentials(
    mechanism: str, user: str, password: str
) -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=[mechanism], users={user: password}
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
            max_block_ms=5000,
        )
        try:
            await within(producer.start(), 10, "start")
            metadata = await within(producer.send("scram-raw", b"v"), 10, "send")
        finally:
            await within(producer.close(), 10, "close")
        assert isinstance(metadata, RecordMetadata)
        assert cluster.sasl_failures == 0
        assert cluster.sasl_stats.completed[mechanism] >= 1


@pytest.mark.asyncio
async def test_a_different_password_is_still_refused() -> None:
    # The raw bytes differ: "pass word" (a plain space) is not "pass\u00a0word".
    async with MockCluster(
        brokers=1, sasl_mechanisms=["SCRAM-SHA-256"], users={"alice": PASSWORDS["no-break-space"]}
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="alice",
            sasl_plain_password="pass word",
            max_block_ms=3000,
        )
        try:
            with pytest.raises(errors.SaslAuthenticationError):
                await within(producer.start(), 10, "start")
        finally:
            await within(producer.close(), 10, "close")
