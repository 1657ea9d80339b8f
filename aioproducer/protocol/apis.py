"""Every API this client speaks, by key.

Kept apart from the schema modules (``messages.py``, ``txn_messages.py``,
``sasl_messages.py``): they import :class:`~aioproducer.protocol.messages.Api`,
and this registry imports them, so the arrows run one way.
"""

from __future__ import annotations

from .messages import API_VERSIONS, INIT_PRODUCER_ID, METADATA, PRODUCE, Api
from .sasl_messages import SASL_APIS
from .txn_messages import TXN_APIS

__all__ = ["APIS_BY_KEY"]

APIS_BY_KEY: dict[int, Api] = {
    api.key: api for api in (API_VERSIONS, METADATA, PRODUCE, INIT_PRODUCER_ID, *TXN_APIS, *SASL_APIS)
}
