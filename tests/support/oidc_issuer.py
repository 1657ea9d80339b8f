"""A tiny OpenID Connect issuer on loopback: a JWKS and a client-credentials token endpoint.

Apache Kafka's ``OAuthBearerValidatorCallbackHandler`` (KIP-768) verifies
OAUTHBEARER tokens against the keys its ``sasl.oauthbearer.jwks.endpoint.url``
serves; aioproducer's ``ClientCredentialsTokenProvider`` fetches tokens from
a token endpoint. :class:`OidcIssuer` is both, in a background thread so that
a broker can fetch keys while no event loop runs (it starts before the broker
and outlives it):

* ``GET /jwks`` returns the RSA public key (RFC 7517) under :attr:`kid`;
* ``POST /token`` takes ``grant_type=client_credentials`` with HTTP Basic
  client authentication (RFC 6749 section 4.4) and returns an RS256-signed JWT
  (RFC 7519) whose ``sub`` is the client id.

Tokens are signed with ``cryptography`` directly (RS256 is RSASSA-PKCS1-v1_5
with SHA-256, RFC 7518 section 3.3); :meth:`sign` makes tokens tests craft
themselves, and ``foreign_key=True`` signs with a key the JWKS does not list.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

__all__ = ["OidcIssuer"]

AUDIENCE = "kafka"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(n: int) -> str:
    return _b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class OidcIssuer:
    """JWKS and token endpoints for registered clients (``{client_id: secret}``)."""

    def __init__(self, clients: dict[str, str], *, lifetime_s: int = 3600) -> None:
        self.clients = dict(clients)
        self.lifetime_s = lifetime_s
        self.kid = "test-key-1"
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._foreign_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.token_requests: list[dict[str, str]] = []
        self.jwks_requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- addresses --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, also the ``iss`` of every token."""
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return self.base_url + "/jwks"

    @property
    def token_url(self) -> str:
        return self.base_url + "/token"

    # -- tokens -----------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        key = {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": _uint(numbers.n),
            "e": _uint(numbers.e),
        }
        return {"keys": [key]}

    def sign(self, claims: dict[str, Any], *, foreign_key: bool = False) -> str:
        """An RS256 JWS of ``claims`` (``iss``, ``aud``, ``iat``, ``exp`` filled in if absent)."""
        now = int(time.time())
        body = {
            "iss": self.base_url,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + self.lifetime_s,
            **claims,
        }
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(body).encode())}"
        )
        key = self._foreign_key if foreign_key else self._key
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> OidcIssuer:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output quiet

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    self._json(404, {"error": "not_found"})
                    return
                issuer.jwks_requests += 1
                self._json(200, issuer.jwks())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                issuer.token_requests.append(form)
                if self.path != "/token":
                    self._json(404, {"error": "not_found"})
                    return
                scheme, _, encoded = (self.headers.get("Authorization") or "").partition(" ")
                client_id, _, secret = (
                    base64.b64decode(encoded).decode().partition(":")
                    if scheme == "Basic"
                    else ("", "", "")
                )
                if issuer.clients.get(client_id) != secret or not secret:
                    self._json(401, {"error": "invalid_client"})
                    return
                if form.get("grant_type") != "client_credentials":
                    self._json(400, {"error": "unsupported_grant_type"})
                    return
                claims = {"sub": client_id, "scope": form.get("scope", "")}
                self._json(
                    200,
                    {
                        "access_token": issuer.sign(claims),
                        "token_type": "Bearer",
                        "expires_in": issuer.lifetime_s,
                    },
                )

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="oidc-issuer", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
