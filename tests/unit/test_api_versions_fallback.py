"""KIP-511: a broker that refuses our ApiVersions version is asked again at the
highest version its refusal lists (as Java's NetworkClient does), not at v0,
so that it still learns the client's name and the negotiation takes two round
trips, not three."""

from __future__ import annotations

import asyncio
from typing import Any

from aioproducer import errors
from aioproducer.net.connect import _negotiate
from aioproducer.protocol.apis import API_VERSIONS, METADATA
from aioproducer.protocol.generated import ApiVersionsResponse
from aioproducer.protocol.generated.api_versions import ApiVersion


class _OldBroker:
    """Speaks ApiVersions up to ``max_api_versions`` and Metadata up to v12."""

    def __init__(self, max_api_versions: int | None) -> None:
        self.max_api_versions = max_api_versions
        self.asked: list[tuple[int, Any]] = []
        self.node_id = 1
        self.finalized_features_epoch = -1
        self.finalized_features: dict[str, int] = {}

    async def request(self, api: Any, body: Any, *, version: int, timeout: float) -> Any:
        assert api is API_VERSIONS
        self.asked.append((version, body))
        listed = (
            []
            if self.max_api_versions is None
            else [
                ApiVersion(
                    api_key=API_VERSIONS.key, min_version=0, max_version=self.max_api_versions
                ),
                ApiVersion(api_key=METADATA.key, min_version=0, max_version=12),
            ]
        )
        top = self.max_api_versions if self.max_api_versions is not None else 0
        if version > top:
            return ApiVersionsResponse(
                error_code=errors.UnsupportedVersionError.code, api_keys=listed
            )
        return ApiVersionsResponse(
            error_code=0,
            api_keys=listed or [ApiVersion(api_key=METADATA.key, min_version=0, max_version=12)],
        )


def _negotiate_with(broker: _OldBroker) -> dict[int, int]:
    return asyncio.run(_negotiate(broker, "1.2.3", 5.0))  # type: ignore[arg-type]  # a stand-in


def test_refused_version_is_retried_at_the_brokers_highest() -> None:
    broker = _OldBroker(max_api_versions=3)  # Kafka 2.4-3.8
    versions = _negotiate_with(broker)
    assert [v for v, _ in broker.asked] == [API_VERSIONS.max_version, 3]
    assert broker.asked[1][1].client_software_name == "aioproducer"
    assert versions[METADATA.key] == 12


def test_refusal_without_a_list_falls_back_to_v0() -> None:
    broker = _OldBroker(max_api_versions=None)
    _negotiate_with(broker)
    assert [v for v, _ in broker.asked] == [API_VERSIONS.max_version, 0]
