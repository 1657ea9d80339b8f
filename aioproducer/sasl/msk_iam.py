"""AWS MSK IAM authentication: OAUTHBEARER tokens signed with AWS credentials.

Amazon MSK brokers with IAM access control accept, on their SASL/OAUTHBEARER
listener, a token that is the base64url (unpadded) text of a SigV4-presigned
URL ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&...``
valid for 15 minutes. AWS's ``aws-msk-iam-sasl-signer-python`` builds it
(``MSKAuthTokenProvider.generate_auth_token``) from the usual credential chain
(environment, profile, instance role), from a named profile, or by assuming a
role. Java clients use the same token through ``IAMOAuthBearerLoginCallbackHandler``
(``sasl.mechanism=OAUTHBEARER``); the older ``AWS_MSK_IAM`` mechanism of
``aws-msk-iam-auth`` sends a JSON payload instead and is not spoken here.

Signing is local, but finding credentials may call the instance metadata
service or STS: it runs in a worker thread, and the token is cached and
renewed ahead of its expiry (:class:`~aioproducer.sasl.token_refresh.RefreshingToken`),
so a KIP-368 re-authentication never waits for AWS.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from typing import Any

from .. import errors
from .token_refresh import RefreshingToken, RefreshingTokenProvider

__all__ = ["MSKIAMTokenProvider"]

_EXTRA = "pip install 'aioproducer[msk-iam]'"


def _require_signer() -> Any:
    try:
        return importlib.import_module("aws_msk_iam_sasl_signer.MSKAuthTokenProvider")
    except ImportError:
        raise errors.ConfigurationError(
            f"MSKIAMTokenProvider needs the aws-msk-iam-sasl-signer-python package: {_EXTRA}"
        ) from None


class MSKIAMTokenProvider(RefreshingTokenProvider):
    """OAUTHBEARER tokens for Amazon MSK IAM, as ``sasl_oauth_token_provider``.

    Use with ``security_protocol="SASL_SSL"`` and ``sasl_mechanism="OAUTHBEARER"``.
    Credentials come from ``role_arn`` (assumed with STS), else ``aws_profile``,
    else botocore's default chain (``AWS_ACCESS_KEY_ID``..., profile, instance role).
    """

    def __init__(
        self,
        region: str,
        aws_profile: str | None = None,
        role_arn: str | None = None,
        *,
        sts_session_name: str | None = None,
    ) -> None:
        signer = _require_signer()
        if not isinstance(region, str) or not region.strip():
            raise errors.ConfigurationError(
                f"MSKIAMTokenProvider: region must be an AWS region name, got {region!r}"
            )
        if aws_profile is not None and role_arn is not None:
            raise errors.ConfigurationError(
                "MSKIAMTokenProvider: give aws_profile or role_arn, not both"
            )
        if sts_session_name is not None and role_arn is None:
            raise errors.ConfigurationError("MSKIAMTokenProvider: sts_session_name needs role_arn")
        self.region = region.strip()
        self.aws_profile = aws_profile
        self.role_arn = role_arn
        generate: Callable[[], tuple[str, int]]
        if role_arn is not None:
            session = sts_session_name or signer.DEFAULT_STS_SESSION_NAME
            generate = lambda: signer.generate_auth_token_from_role_arn(
                self.region, role_arn, session
            )
        elif aws_profile is not None:
            generate = lambda: signer.generate_auth_token_from_profile(self.region, aws_profile)
        else:
            generate = lambda: signer.generate_auth_token(self.region)
        self._generate = generate
        self._tokens = RefreshingToken(self._fetch, describe=f"AWS MSK IAM signer ({self.region})")

    def __repr__(self) -> str:
        source = (
            f"role_arn={self.role_arn!r}"
            if self.role_arn
            else f"aws_profile={self.aws_profile!r}"
            if self.aws_profile
            else "default credentials"
        )
        return f"<MSKIAMTokenProvider region={self.region!r} {source}>"

    async def _fetch(self) -> tuple[str, float]:
        """(token, lifetime in seconds), signed in a worker thread."""
        try:
            token, expiry_ms = await asyncio.to_thread(self._generate)
        except Exception as exc:
            # Retriable like a token endpoint that is down: credentials may
            # appear (a role being attached); bounded by max_block_ms.
            raise errors.ConnectionFailedError(
                f"AWS MSK IAM token for region {self.region} could not be signed: {exc!r}"
            ) from exc
        return str(token), max(float(expiry_ms) / 1000 - time.time(), 1.0)
