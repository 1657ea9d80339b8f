"""A throwaway PKI for TLS tests, generated at fixture time with trustme.

Nothing here is checked in: :func:`make_pki` issues every certificate into a
temporary directory when the session starts. It holds

* a CA (``ca_file``) and an unrelated second CA (``other_ca_file``);
* a server certificate for ``localhost`` and ``127.0.0.1``, one naming only
  another host (hostname mismatch) and one that expired yesterday;
* a client certificate for mutual TLS, with its key in clear and encrypted
  with ``client_key_password``.

Server contexts come from :meth:`Pki.server_context`; client contexts (for
aioproducer or plain ``ssl`` clients) from :meth:`Pki.client_context`.
"""

from __future__ import annotations

import datetime
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

__all__ = ["SERVER_HOSTS", "Pki", "make_pki"]

#: Names the good server certificate carries.
SERVER_HOSTS = ("localhost", "127.0.0.1")
#: The only name the mismatching server certificate carries.
OTHER_HOST = "kafka.invalid"


@dataclass(frozen=True)
class Pki:
    """Certificate files of one generated PKI, and contexts built from them."""

    directory: Path
    ca_file: str
    other_ca_file: str
    client_cert_file: str
    client_key_file: str
    client_encrypted_key_file: str
    client_key_password: str
    _ca: trustme.CA
    _server: trustme.LeafCert
    _wrong_host: trustme.LeafCert
    _expired: trustme.LeafCert

    def __repr__(self) -> str:
        return f"Pki({str(self.directory)!r})"

    def server_context(
        self, *, require_client_cert: bool = False, cert: str = "good"
    ) -> ssl.SSLContext:
        """A server-side context; ``cert`` is ``good``, ``wrong_host`` or ``expired``.

        With ``require_client_cert`` the server demands a certificate signed by
        the CA (mutual TLS).
        """
        leaf = {"good": self._server, "wrong_host": self._wrong_host, "expired": self._expired}[
            cert
        ]
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        leaf.configure_cert(ctx)
        if require_client_cert:
            self._ca.configure_trust(ctx)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def client_context(self, *, with_cert: bool = False) -> ssl.SSLContext:
        """A client context trusting the CA, presenting the client certificate if asked."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if with_cert:
            ctx.load_cert_chain(self.client_cert_file, self.client_key_file)
        return ctx

    def kafka_key_and_chain(self, cert: str = "good") -> tuple[str, str]:
        """The server key and certificate chain as Apache Kafka reads them inline.

        For ``ssl.keystore.type=PEM`` with ``ssl.keystore.key`` and
        ``ssl.keystore.certificate.chain`` (KIP-651): the key as unencrypted
        PKCS#8 (Java has no reader for the SEC1 ``EC PRIVATE KEY`` form trustme
        writes; a PEM key store *file* would need an encrypted key). ``cert`` is
        ``good``, ``wrong_host`` or ``expired``.
        """
        leaf = {"good": self._server, "wrong_host": self._wrong_host, "expired": self._expired}[
            cert
        ]
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
        return pkcs8.decode(), chain.decode()

    def librdkafka_ssl(
        self, *, with_cert: bool = False, ca_file: str | None = None
    ) -> dict[str, str]:
        """confluent-kafka settings trusting the CA (or ``ca_file``), with the client cert if asked."""
        conf = {"ssl.ca.location": ca_file or self.ca_file}
        if with_cert:
            conf["ssl.certificate.location"] = self.client_cert_file
            conf["ssl.key.location"] = self.client_key_file
        return conf


def make_pki(directory: Path) -> Pki:
    """Issue every certificate into ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    other_ca = trustme.CA()
    server = ca.issue_cert(*SERVER_HOSTS)
    wrong_host = ca.issue_cert(OTHER_HOST)
    now = datetime.datetime.now(datetime.timezone.utc)
    expired = ca.issue_cert(
        *SERVER_HOSTS,
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    client = ca.issue_cert("client@example.com", common_name="client")

    def write(name: str, data: bytes) -> str:
        path = directory / name
        path.write_bytes(data)
        return str(path)

    password = "client-key-pass"
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    )
    return Pki(
        directory=directory,
        ca_file=write("ca.pem", ca.cert_pem.bytes()),
        other_ca_file=write("other-ca.pem", other_ca.cert_pem.bytes()),
        client_cert_file=write(
            "client.pem", b"".join(blob.bytes() for blob in client.cert_chain_pems)
        ),
        client_key_file=write("client.key", client.private_key_pem.bytes()),
        client_encrypted_key_file=write("client-encrypted.key", encrypted),
        client_key_password=password,
        _ca=ca,
        _server=server,
        _wrong_host=wrong_host,
        _expired=expired,
    )
