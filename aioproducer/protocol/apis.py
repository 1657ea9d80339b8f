"""Every API this client speaks, by key.

Kept apart from ``messages.py`` and ``txn_messages.py`` because the latter
imports :class:`~aioproducer.protocol.messages.Api` from the former; a registry
in either would make the two import each other.
"""

from __future__ import annotations

from .messages import API_VERSIONS, INIT_PRODUCER_ID, METADATA, PRODUCE, Api
from .sasl_messages import SASL_APIS
from .txn_messages import TXN_APIS

__all__ = ["APIS_BY_KEY"]

APIS_BY_KEY: dict[int, Api] = {
    api.key: api
    for api in (API_VERSIONS, METADATA, PRODUCE, INIT_PRODUCER_ID, *TXN_APIS, *SASL_APIS)
}
