"""One Apache Kafka broker with a listener for every security set-up, and ACLs.

:func:`start_secure_kafka` starts a single :class:`KafkaBroker` (KRaft) with

===========  =================  =====================================================
listener     protocol           what it checks
===========  =================  =====================================================
PLAINTEXT    PLAINTEXT          inter-broker and admin: principal ``ANONYMOUS``, a super user
TLS          SSL                PEM key store (inline key and chain) and PEM trust store
MTLS         SSL                ``ssl.client.auth=required``: principal ``User:client``
EXPIRED      SSL                a server certificate that expired yesterday
SASL         SASL_PLAINTEXT     PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured JWS)
SASLTLS      SASL_SSL           PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (no OAUTHBEARER)
OIDC         SASL_PLAINTEXT     OAUTHBEARER verified against :class:`OidcIssuer`'s JWKS (KIP-768)
REAUTH       SASL_PLAINTEXT     SCRAM-SHA-512, ``connections.max.reauth.ms`` = :data:`REAUTH_MS` (KIP-368)
===========  =================  =====================================================

Authorization is Kafka's ``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found=false``; ``admin`` and ``ANONYMOUS`` are
super users (so are clients of the TLS listener, which carry no identity).
ACLs made at start, through the Admin API (confluent-kafka) on PLAINTEXT:

* ``alice``, ``client`` (mTLS) and ``orders-service`` (OIDC) may write
  topics named ``ok-*``; ``alice`` may use transactional ids ``alice-tx-*``;
* ``bob`` may write ``bob-*`` only (enough for an idempotent producer id,
  KIP-679, and nothing else); ``carol`` may do nothing.

Users (:data:`USERS`) exist for PLAIN (JAAS ``user_<name>``) and for both SCRAM
mechanisms (``kafka-storage format --add-scram``). Create topics and read them
back over :attr:`SecureKafka.admin_bootstrap`; tests add ACLs of their own
with :meth:`SecureKafka.allow`.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.support.certs import Pki
from tests.support.kafka_broker import KafkaBroker, Listener
from tests.support.oidc_issuer import AUDIENCE, OidcIssuer
from tests.support.verify import create_topic

__all__ = [
    "GRANTED_PREFIX",
    "OIDC_CLIENTS",
    "REAUTH_MS",
    "USERS",
    "SecureKafka",
    "UnsecuredTokens",
    "kafka_jars_present",
    "start_secure_kafka",
]

USERS = {
    "admin": "admin-Secret-0",
    "alice": "alice-Secret-1",
    "bob": "bob-Secret-2",
    "carol": "carol-Secret-3",
}
OIDC_CLIENTS = {"orders-service": "client-Secret-9"}
GRANTED_PREFIX = "ok-"
BOB_PREFIX = "bob-"
ALICE_TRANSACTIONS = "alice-tx-"
REAUTH_MS = 3000
#: Names the listeners go by (and their security protocols).
LISTENERS = {
    "TLS": "SSL",
    "MTLS": "SSL",
    "EXPIRED": "SSL",
    "SASL": "SASL_PLAINTEXT",
    "SASLTLS": "SASL_SSL",
    "OIDC": "SASL_PLAINTEXT",
    "REAUTH": "SASL_PLAINTEXT",
}

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _jaas(mechanism: str) -> str:
    """The broker's JAAS entry for ``mechanism`` on a listener."""
    if mechanism == "PLAIN":
        users = " ".join(f'user_{name}="{pw}"' for name, pw in USERS.items())
        return f'{_PLAIN_MODULE} required username="admin" password="{USERS["admin"]}" {users};'
    if mechanism in _SCRAM:
        return f"{_SCRAM_MODULE} required;"
    # The broker's own (unused) login on this listener still needs a subject.
    return f'{_OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin";'


def _sasl(mechanisms: Iterable[str]) -> dict[str, str]:
    mechanisms = list(mechanisms)
    props = {"sasl.enabled.mechanisms": ",".join(mechanisms)}
    for mechanism in mechanisms:
        props[f"{mechanism.lower()}.sasl.jaas.config"] = _jaas(mechanism)
    return props


def _tls(pki: Pki, cert: str = "good") -> dict[str, str]:
    # KIP-651: the key and chain inline, the trust store as a PEM file.
    key, chain = pki.kafka_key_and_chain(cert)
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": key,
        "ssl.keystore.certificate.chain": chain,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_file,
    }


def _listeners(pki: Pki, issuer: OidcIssuer) -> list[Listener]:
    every = ("PLAIN", *_SCRAM)
    return [
        Listener("TLS", "SSL", properties=_tls(pki)),
        Listener("MTLS", "SSL", properties={**_tls(pki), "ssl.client.auth": "required"}),
        Listener("EXPIRED", "SSL", properties=_tls(pki, "expired")),
        Listener("SASL", "SASL_PLAINTEXT", properties=_sasl((*every, "OAUTHBEARER"))),
        Listener("SASLTLS", "SASL_SSL", properties={**_sasl(every), **_tls(pki)}),
        Listener(
            "OIDC",
            "SASL_PLAINTEXT",
            properties={
                **_sasl(["OAUTHBEARER"]),
                "oauthbearer.sasl.server.callback.handler.class": _JWKS_VALIDATOR,
                "oauthbearer.sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
                "oauthbearer.sasl.oauthbearer.expected.audience": AUDIENCE,
                "oauthbearer.sasl.oauthbearer.expected.issuer": issuer.base_url,
            },
        ),
        Listener(
            "REAUTH",
            "SASL_PLAINTEXT",
            properties={**_sasl(["SCRAM-SHA-512"]), "connections.max.reauth.ms": str(REAUTH_MS)},
        ),
    ]


class UnsecuredTokens:
    """OAUTHBEARER token provider: a fresh unsecured JWS (``alg: none``) per login.

    What Kafka's default ``OAuthBearerUnsecuredValidatorCallbackHandler``
    accepts: a ``sub`` and an ``exp`` (seconds since the epoch), no signature.
    """

    def __init__(self, sub: str, lifetime_s: float = 3600) -> None:
        self.sub = sub
        self.lifetime_s = lifetime_s
        self.calls = 0

    async def token(self) -> str:
        self.calls += 1
        # Whole seconds: Kafka refuses an ``iat`` later than its clock in ms
        # (no skew allowed by default), which a fractional one read back within
        # the same millisecond is.
        now = int(time.time())
        claims = {"sub": self.sub, "iat": now, "exp": now + self.lifetime_s}
        return f"{_b64url({'alg': 'none'})}.{_b64url(claims)}."


def _b64url(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


_OPERATIONS = {
    "WRITE": AclOperation.WRITE,
    "DESCRIBE": AclOperation.DESCRIBE,
    "READ": AclOperation.READ,
    "CREATE": AclOperation.CREATE,
    "IDEMPOTENT_WRITE": AclOperation.IDEMPOTENT_WRITE,
}
_RESOURCES = {
    "TOPIC": ResourceType.TOPIC,
    "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID,
    "CLUSTER": ResourceType.BROKER,  # confluent-kafka's name for the cluster resource
    "GROUP": ResourceType.GROUP,
}


@dataclass
class SecureKafka:
    """The started broker, the PKI its TLS listeners use, and the OIDC issuer."""

    broker: KafkaBroker
    pki: Pki
    issuer: OidcIssuer

    @property
    def admin_bootstrap(self) -> str:
        """The PLAINTEXT listener: principal ANONYMOUS, a super user (admin and read-back)."""
        return self.broker.bootstrap_servers

    def address(self, listener: str) -> str:
        """``127.0.0.1:PORT`` of ``listener`` (one of :data:`LISTENERS`)."""
        return self.broker.address(listener)

    def topic(self, partitions: int = 3, *, prefix: str = GRANTED_PREFIX) -> str:
        """A new topic ``<prefix><random>`` created as super user; ``ok-`` ones are writable."""
        return create_topic(self.admin_bootstrap, f"{prefix}{uuid.uuid4().hex[:12]}", partitions)

    def allow(
        self,
        principal: str,
        resource: str,
        name: str,
        operations: Iterable[str],
        *,
        prefixed: bool = False,
        timeout: float = 30.0,
    ) -> None:
        """Grant ``User:<principal>`` ``operations`` on ``resource`` ``name``; wait until in force.

        ``resource`` is TOPIC, TRANSACTIONAL_ID, GROUP or CLUSTER (``name``
        ``kafka-cluster``); ``operations`` names from WRITE, DESCRIBE, READ,
        CREATE, IDEMPOTENT_WRITE.
        """
        pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
        bindings = [
            AclBinding(
                _RESOURCES[resource],
                name,
                pattern,
                f"User:{principal}",
                "*",
                _OPERATIONS[op],
                AclPermissionType.ALLOW,
            )
            for op in operations
        ]
        admin = AdminClient({"bootstrap.servers": self.admin_bootstrap})
        for future in admin.create_acls(bindings, request_timeout=timeout).values():
            future.result(timeout)
        # The controller has committed them; wait until the broker's authorizer
        # (which answers DescribeAcls) has applied the metadata records too.
        wanted = {(b.name, b.principal, b.operation) for b in bindings}
        query = AclBindingFilter(
            _RESOURCES[resource],
            name,
            pattern,
            f"User:{principal}",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        deadline = time.monotonic() + timeout
        while True:
            seen = admin.describe_acls(query, request_timeout=timeout).result(timeout)
            if wanted <= {(b.name, b.principal, b.operation) for b in seen}:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"ACLs {sorted(map(str, wanted))} not in force after {timeout} s"
                )
            time.sleep(0.1)

    def producer_settings(
        self, listener: str, mechanism: str | None = None, user: str = "alice", **overrides: Any
    ) -> dict[str, Any]:
        """``Producer`` keyword arguments for ``listener`` as ``user`` (its password from USERS).

        TLS listeners trust the PKI's CA; MTLS presents the client certificate;
        OAUTHBEARER on SASL uses an unsecured JWS for ``user``; on OIDC the
        client-credentials provider of ``orders-service``.
        """
        protocol = LISTENERS[listener]
        settings: dict[str, Any] = {
            "bootstrap_servers": self.address(listener),
            "security_protocol": protocol,
        }
        if protocol in ("SSL", "SASL_SSL"):
            settings["ssl_cafile"] = self.pki.ca_file
        if listener == "MTLS":
            settings.update(
                ssl_certfile=self.pki.client_cert_file, ssl_keyfile=self.pki.client_key_file
            )
        if mechanism == "OAUTHBEARER" and listener == "OIDC":
            ((client_id, secret),) = OIDC_CLIENTS.items()
            settings.update(
                sasl_mechanism="OAUTHBEARER",
                sasl_oauthbearer_token_endpoint_url=self.issuer.token_url,
                sasl_oauthbearer_client_id=client_id,
                sasl_oauthbearer_client_secret=secret,
                sasl_oauthbearer_scope="kafka",
            )
        elif mechanism == "OAUTHBEARER":
            settings.update(
                sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=UnsecuredTokens(user)
            )
        elif mechanism is not None:
            settings.update(
                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=USERS[user]
            )
        settings.update(overrides)
        return settings

    def stop(self) -> None:
        """Stop the broker, then the issuer (the broker may fetch keys until it stops)."""
        try:
            self.broker.stop()
        finally:
            self.issuer.stop()


def start_secure_kafka(workdir: Path, pki: Pki, *, heap: str = "768m") -> SecureKafka:
    """Start the issuer and the broker, and grant the ACLs the module docstring lists.

    Everything started is stopped again if a later step fails.
    """
    issuer = OidcIssuer(OIDC_CLIENTS).start()
    broker: KafkaBroker | None = None
    try:
        broker = KafkaBroker(
            workdir=workdir,
            listeners=_listeners(pki, issuer),
            properties={
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin;User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
                # mTLS principal: the certificate's CN instead of its whole DN.
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            },
            scram_users=[(m, user, pw) for m in _SCRAM for user, pw in USERS.items()],
            # Kafka 4 fetches no OAUTHBEARER URL it was not told to allow.
            jvm_args=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={issuer.jwks_url}"],
            heap=heap,
        )
        broker.start()
        kafka = SecureKafka(broker, pki, issuer)
        for principal in ("alice", "client", *OIDC_CLIENTS):
            kafka.allow(principal, "TOPIC", GRANTED_PREFIX, ["WRITE", "DESCRIBE"], prefixed=True)
        kafka.allow(
            "alice", "TRANSACTIONAL_ID", ALICE_TRANSACTIONS, ["WRITE", "DESCRIBE"], prefixed=True
        )
        kafka.allow("bob", "TOPIC", BOB_PREFIX, ["WRITE", "DESCRIBE"], prefixed=True)
    except BaseException:
        if broker is not None:
            broker.stop()
        issuer.stop()
        raise
    return kafka


def kafka_jars_present() -> str | None:
    """None when the Kafka jars and Java are there, else why not (for a skip)."""
    from tests.support.kafka_broker import KafkaJarsUnavailable, find_kafka_libs

    try:
        find_kafka_libs()
    except KafkaJarsUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            raise
        return str(exc)
    return None


async def deliver_and_read_back(
    kafka: SecureKafka, settings: dict[str, Any], topic: str, count: int = 60
) -> None:
    """Send ``count`` keyed records with aioproducer; read them back with confluent-kafka.

    Every record must be acknowledged, and stored once, in the order sent per key.
    """
    from aioproducer import Producer, RecordMetadata
    from tests.support.aio import gather_within, read_back, within

    settings = {"linger_ms": 5, **settings}
    producer = Producer(**settings)
    await within(producer.start(), 30, "start")
    try:
        futures = [
            await producer.enqueue(topic, f"v{i}".encode(), key=f"k{i % 5}".encode())
            for i in range(count)
        ]
        results = await gather_within(futures, 30, "delivery")
    finally:
        await within(producer.close(), 30, "close")
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    assert not failed, failed[:3]
    records = await read_back(kafka.admin_bootstrap, topic, count)
    assert len(records) == count, f"{len(records)} of {count} records read back"
    for key in {f"k{i % 5}".encode() for i in range(count)}:
        sent = [f"v{i}".encode() for i in range(count) if f"k{i % 5}".encode() == key]
        assert [r.value for r in records if r.key == key] == sent
