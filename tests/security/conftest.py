"""Fixtures of the TLS and SASL tests: a PKI generated once per session."""

from __future__ import annotations

import pytest

from tests.support.certs import Pki, make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """CA, server and client certificates issued for this session (never checked in)."""
    return make_pki(tmp_path_factory.mktemp("pki"))
