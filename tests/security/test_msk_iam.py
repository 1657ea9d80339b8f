"""Amazon MSK IAM through OAUTHBEARER: the signed token reaches the broker, records follow.

The signer runs for real with fake credentials from the environment; nothing
goes to AWS (signing is local). The mock broker's OAUTHBEARER validator
records each token and decodes it as MSK does: base64url of a presigned URL.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from aioproducer import Producer
from aioproducer.errors import ConfigurationError
from aioproducer.sasl import MSKIAMTokenProvider
from aioproducer.testing import MockCluster
from tests.support.aio import within
from tests.support.extras import require

REGION = "eu-west-3"
ACCESS_KEY = "AKIAFAKEFAKEFAKE0001"


def _decode(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials from the environment only: no profile, no metadata service."""
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake/secret/key/not/used/anywhere/0000")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")


@pytest.mark.asyncio
async def test_msk_iam_token_reaches_broker_and_records_are_produced(fake_aws: None) -> None:
    require("aws_msk_iam_sasl_signer", extra="msk-iam")
    tokens: list[str] = []

    def validator(token: str) -> Mapping[str, Any]:
        tokens.append(token)
        return {"sub": "msk-iam-user"}

    provider = MSKIAMTokenProvider(region=REGION)
    async with MockCluster(
        brokers=1, sasl_mechanisms=["OAUTHBEARER"], oauth_validator=validator
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
            linger_ms=2,
        )
        await within(producer.start(), 10, "start")
        try:
            metadata = await within(producer.send("msk", b"v", key=b"k"), 10, "send")
        finally:
            await within(producer.close(), 10, "close")
        # The producer's close stops the background renewal: no timer is left
        # to sign tokens (and call STS) for a producer that is gone.
        assert provider._tokens._timer is None and provider._tokens._fetching is None
        assert metadata.offset == 0
        assert cluster.sasl_authentications_by_mechanism().keys() == {"OAUTHBEARER"}
    assert tokens, "the broker saw no token"
    url = urlparse(_decode(tokens[0]))
    query = parse_qs(url.query)
    assert (url.scheme, url.hostname) == ("https", f"kafka.{REGION}.amazonaws.com")
    assert "Action=kafka-cluster%3AConnect" in url.query
    assert query["X-Amz-Credential"][0].startswith(f"{ACCESS_KEY}/")
    assert f"/{REGION}/kafka-cluster/aws4_request" in query["X-Amz-Credential"][0]
    assert query["X-Amz-Signature"][0]


def test_missing_extra_is_a_typed_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import raise ImportError, as when not installed.
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer.MSKAuthTokenProvider", None)
    with pytest.raises(ConfigurationError, match=r"aioproducer\[msk-iam\]"):
        MSKIAMTokenProvider(region=REGION)


def test_profile_and_role_are_exclusive() -> None:
    require("aws_msk_iam_sasl_signer", extra="msk-iam")
    with pytest.raises(ConfigurationError, match="not both"):
        MSKIAMTokenProvider(REGION, aws_profile="p", role_arn="arn:aws:iam::1:role/r")
    with pytest.raises(ConfigurationError, match="region"):
        MSKIAMTokenProvider(" ")


def test_aws_msk_iam_mechanism_name_points_to_the_provider() -> None:
    with pytest.raises(ConfigurationError) as info:
        Producer(
            "localhost:9092",
            security_protocol="SASL_SSL",
            sasl_mechanism="AWS_MSK_IAM",
        )
    message = str(info.value)
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER" in message
    assert "MSKIAMTokenProvider" in message
