"""Client-side SASL settings and tokens for tests, independent of aioproducer.

* :func:`librdkafka_sasl`: confluent-kafka properties for a mechanism; for
  OAUTHBEARER librdkafka's built-in unsecured JWT (``principal=...``), which
  Kafka's default validator, and the mock's, accept.
* :func:`unsecured_jwt`: an ``alg: none`` JWT with the given claims.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["librdkafka_sasl", "unsecured_jwt"]


def librdkafka_sasl(mechanism: str, user: str = "alice", password: str = "") -> dict[str, Any]:
    """confluent-kafka settings authenticating ``user`` with ``mechanism``."""
    if mechanism == "OAUTHBEARER":
        return {
            "sasl.mechanism": mechanism,
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={user}",
        }
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def unsecured_jwt(claims: Mapping[str, Any], alg: str = "none") -> str:
    """``header.payload.`` with base64url JSON parts and an empty signature."""

    def part(obj: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}."
