"""TLS and mutual TLS to the registry: Confluent's property names, and typed, prompt failures.

The mock registry serves https with a server context from a throwaway PKI; with
``require_client_cert`` it refuses a client that presents no certificate signed
by the CA, as a registry configured for mTLS does.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from aioproducer import Producer
from aioproducer.schema_registry import (
    AvroSerializer,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryTLSError,
    SchemaRegistryUnavailableError,
    split_wire,
)
from aioproducer.testing import MockCluster
from aioproducer.testing.mock_schema_registry import MockSchemaRegistry
from tests.support.aio import within

pytest.importorskip("trustme")
from tests.support.certs import Pki, make_pki

pytestmark = pytest.mark.asyncio

ORDER = (
    '{"type": "record", "name": "Order", "namespace": "shop", '
    '"fields": [{"name": "id", "type": "long"}]}'
)
# Far above a TLS failure on loopback (milliseconds), far below a hang.
BOUND_S = 10.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("sr-pki")))


@pytest_asyncio.fixture
async def mtls_registry(pki: Pki) -> AsyncIterator[MockSchemaRegistry]:
    async with MockSchemaRegistry(ssl=pki.server_context(require_client_cert=True)) as registry:
        yield registry


def mtls_conf(pki: Pki, url: str, prefix: str = "schema.registry.") -> dict[str, str]:
    return {
        f"{prefix}url": url,
        f"{prefix}ssl.ca.location": pki.ca_file,
        f"{prefix}ssl.certificate.location": pki.client_cert_file,
        f"{prefix}ssl.key.location": pki.client_key_file,
    }


@pytest.mark.parametrize("prefix", ["schema.registry.", ""], ids=["prefixed", "python-names"])
async def test_mtls_with_confluents_property_names(
    pki: Pki, mtls_registry: MockSchemaRegistry, prefix: str
) -> None:
    assert mtls_registry.url.startswith("https://")
    conf = mtls_conf(pki, mtls_registry.url, prefix)
    async with MockCluster() as cluster, SchemaRegistryClient.from_config(conf) as registry:
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER)
        ) as producer:
            await within(producer.send("orders", {"id": 7}), BOUND_S, "send")
        schema_id = split_wire(cluster.records("orders")[0].value)[0]
        assert (await registry.get_schema(schema_id)).schema_str == ORDER
    assert mtls_registry.subjects == {"orders-value": [schema_id]}

    # confluent-kafka-python's own client takes the same names (unprefixed).
    confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
    unprefixed = mtls_conf(pki, mtls_registry.url, "")
    theirs = await asyncio.to_thread(
        lambda: confluent_sr.SchemaRegistryClient(unprefixed).get_schema(schema_id).schema_str
    )
    assert theirs == ORDER


async def test_an_encrypted_client_key_with_its_password(
    pki: Pki, mtls_registry: MockSchemaRegistry
) -> None:
    conf = {
        **mtls_conf(pki, mtls_registry.url),
        "schema.registry.ssl.key.location": pki.client_encrypted_key_file,
        "schema.registry.ssl.key.password": pki.client_key_password,
    }
    async with SchemaRegistryClient.from_config(conf) as registry:
        assert await registry.register_schema("s-value", Schema(ORDER)) == 1


@pytest.mark.parametrize("tls", ["default", "1.2"])
async def test_no_client_certificate_fails_promptly_naming_it(
    pki: Pki, mtls_registry: MockSchemaRegistry, tls: str
) -> None:
    if tls == "default":
        client = SchemaRegistryClient.from_config(
            {
                "schema.registry.url": mtls_registry.url,
                "schema.registry.ssl.ca.location": pki.ca_file,
                "retries.wait.ms": "10",
            }
        )
    else:
        # TLS 1.2 checks the client's certificate inside the handshake: the
        # refusal comes while connecting rather than after.
        context = pki.client_context()
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        client = SchemaRegistryClient(mtls_registry.url, ssl=context, retry_backoff_s=0.01)
    started = time.monotonic()
    async with client as registry:
        with pytest.raises(SchemaRegistryUnavailableError) as failure:
            await within(registry.register_schema("s-value", Schema(ORDER)), BOUND_S, "register")
    assert time.monotonic() - started < BOUND_S
    # However the refusal arrives (a TLS alert, a reset, a bare close), the
    # message points at the client certificate settings.
    assert "ssl.certificate.location" in str(failure.value)
    assert mtls_registry.requests == []  # no request got past TLS


async def test_an_untrusted_registry_certificate_is_a_tls_error_at_once(
    pki: Pki, mtls_registry: MockSchemaRegistry
) -> None:
    conf = {
        **mtls_conf(pki, mtls_registry.url),
        "schema.registry.ssl.ca.location": pki.other_ca_file,
        # Retrying would wait 4 x 5 s: the failure must come from the first attempt.
        "max.retries": "4",
        "retries.wait.ms": "5000",
        "retries.max.wait.ms": "5000",
    }
    async with MockCluster() as cluster, SchemaRegistryClient.from_config(conf) as registry:
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER)
        ) as producer:
            started = time.monotonic()
            with pytest.raises(SchemaRegistryTLSError, match="not trusted") as failure:
                await within(producer.send("orders", {"id": 1}), BOUND_S, "send")
            assert time.monotonic() - started < 3.0
            await producer.flush()
        assert cluster.records("orders") == []
    assert "ssl.ca.location" in str(failure.value)
    assert isinstance(failure.value, SchemaRegistryUnavailableError)
    assert mtls_registry.requests == []


async def test_https_to_a_plain_http_registry_says_so(pki: Pki) -> None:
    async with MockSchemaRegistry() as plain:
        url = plain.url.replace("http://", "https://")
        async with SchemaRegistryClient.from_config(
            {"schema.registry.url": url, "schema.registry.ssl.ca.location": pki.ca_file}
        ) as registry:
            with pytest.raises(SchemaRegistryTLSError, match="does not speak TLS"):
                await within(registry.get_compatibility(), BOUND_S, "get_compatibility")
