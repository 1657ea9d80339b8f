"""Security settings: consistency checks at construction, property names, no secrets shown."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest
import trustme

from aioproducer import Producer, errors
from aioproducer.config import ProducerConfig, config_from_properties
from aioproducer.net.security_properties import parse_jaas_config

SECRET = "s3cret-Pa55word"


class Tokens:
    async def token(self) -> str:
        return "abc.def.ghi"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("client.example")
    files = {
        "ca": root / "ca.pem",
        "cert": root / "client.pem",
        "key": root / "client.key",
        "garbage": root / "garbage.pem",
        "encrypted_key": root / "client-enc.key",
    }
    ca.cert_pem.write_to_path(files["ca"])
    cert.cert_chain_pems[0].write_to_path(files["cert"])
    cert.private_key_pem.write_to_path(files["key"])
    files["garbage"].write_text(
        "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"
    )
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    files["encrypted_key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(SECRET.encode()),
        )
    )
    return files


# -- consistency ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"security_protocol": "TLS"}, "security_protocol must be one of"),
        ({"security_protocol": "SASL_SSL"}, "needs sasl_mechanism"),
        ({"security_protocol": "SASL_PLAINTEXT"}, "needs sasl_mechanism"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "not supported"),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN",
                "sasl_plain_username": "u",
            },
            "needs sasl_plain_password",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_password": "p",
            },
            "needs sasl_plain_username",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
            "sasl_oauth_token_provider",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": object(),
            },
            "async def token",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauthbearer_token_endpoint_url": "https://idp.example/token",
                "sasl_oauthbearer_client_id": "id",
            },
            "client_secret",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": Tokens(),
                "sasl_oauthbearer_token_endpoint_url": "https://idp.example/token",
            },
            "not both",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN",
                "sasl_plain_username": "u",
                "sasl_plain_password": "p",
                "sasl_oauth_token_provider": Tokens(),
            },
            "only apply to sasl_mechanism=OAUTHBEARER",
        ),
        ({"sasl_mechanism": "PLAIN"}, "security_protocol is PLAINTEXT"),
        ({"ssl_cafile": "/etc/hosts"}, "security_protocol is PLAINTEXT"),
        ({"security_protocol": "SSL", "ssl_cafile": "/no/such/ca.pem"}, "no such file"),
        ({"security_protocol": "SSL", "ssl_context": "not a context"}, "ssl.SSLContext"),
        ({"security_protocol": "SSL", "ssl_check_hostname": "yes"}, "ssl_check_hostname"),
    ],
)
def test_inconsistent_settings_fail_at_construction(kwargs: dict, match: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=match):
        Producer("h:9093", **kwargs)


@pytest.mark.parametrize(
    ("username", "password", "named"),
    [
        ("al\x00ice", SECRET, "sasl_plain_username"),
        ("alice", "pa\x00" + SECRET, "sasl_plain_password"),
        ("\x00", "\x00", "sasl_plain_username"),
    ],
)
def test_plain_credentials_with_nul_are_refused_at_construction(
    username: str, password: str, named: str
) -> None:
    # RFC 4616: NUL separates authzid, authcid and passwd; it cannot be inside one.
    with pytest.raises(errors.ConfigurationError, match=f"{named} contains a NUL") as info:
        Producer(
            "h:9093",
            security_protocol="SASL_SSL",
            sasl_mechanism="PLAIN",
            sasl_plain_username=username,
            sasl_plain_password=password,
        )
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    with pytest.raises(errors.ConfigurationError, match=f"{named} contains a NUL"):
        config_from_properties(
            {
                "bootstrap.servers": "h:9093",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": username,
                "sasl.password": password,
            }
        )


def test_certificate_files_that_do_not_parse(pki: dict[str, Path]) -> None:
    with pytest.raises(errors.ConfigurationError, match="ssl_cafile"):
        Producer("h:9093", security_protocol="SSL", ssl_cafile=str(pki["garbage"]))
    with pytest.raises(errors.ConfigurationError, match="could not be loaded"):
        Producer(
            "h:9093",
            security_protocol="SSL",
            ssl_certfile=str(pki["garbage"]),
            ssl_keyfile=str(pki["key"]),
        )
    with pytest.raises(errors.ConfigurationError, match="ssl_keyfile needs ssl_certfile"):
        Producer("h:9093", security_protocol="SSL", ssl_keyfile=str(pki["key"]))
    with pytest.raises(errors.ConfigurationError) as info:
        Producer(
            "h:9093",
            security_protocol="SSL",
            ssl_certfile=str(pki["cert"]),
            ssl_keyfile=str(pki["encrypted_key"]),
            ssl_password="wrong-" + SECRET,
        )
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


def test_files_build_a_verifying_context(pki: dict[str, Path]) -> None:
    p = Producer(
        "h:9093",
        security_protocol="SSL",
        ssl_cafile=str(pki["ca"]),
        ssl_certfile=str(pki["cert"]),
        ssl_keyfile=str(pki["encrypted_key"]),
        ssl_password=SECRET,
    )
    ctx = p.config.security.ssl_context
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1
    off = Producer(
        "h:9093", security_protocol="SSL", ssl_cafile=str(pki["ca"]), ssl_check_hostname=False
    )
    assert off.config.security.ssl_context.check_hostname is False
    assert off.config.security.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_a_users_context_wins_and_is_used_as_is() -> None:
    ctx = ssl.create_default_context()
    p = Producer(
        "h:9093",
        security_protocol="SASL_SSL",
        ssl_context=ctx,
        sasl_mechanism="scram-sha-512",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    assert p.config.security.ssl_context is ctx
    assert (
        p.config.security.sasl is not None and p.config.security.sasl.mechanism == "SCRAM-SHA-512"
    )


def test_plaintext_has_neither_tls_nor_sasl() -> None:
    security = Producer("h:9092").config.security
    assert security.ssl_context is None and security.sasl is None


# -- property names ------------------------------------------------------------


def test_java_jaas_config_for_plain_and_scram() -> None:
    for module in (
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        "org.apache.kafka.common.security.scram.ScramLoginModule",
    ):
        cfg = config_from_properties(
            {
                "bootstrap.servers": "h:9093",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN" if "plain" in module else "SCRAM-SHA-512",
                "sasl.jaas.config": f'{module} required username="alice" password="{SECRET}";',
                "ssl.endpoint.identification.algorithm": "https",
            }
        )
        assert cfg.sasl_plain_username == "alice" and cfg.sasl_plain_password == SECRET
        assert cfg.ssl_check_hostname is True


def test_jaas_parsing_details() -> None:
    assert parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule   required\n"
        '  username="a\\"b"   password="p w;x" ;'
    ) == {"sasl_plain_username": 'a"b', "sasl_plain_password": "p w;x"}
    assert parse_jaas_config("PlainLoginModule required username=bob password=pw;") == {
        "sasl_plain_username": "bob",
        "sasl_plain_password": "pw",
    }
    assert parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="svc" clientSecret="cs" scope="kafka";'
    ) == {
        "sasl_oauthbearer_client_id": "svc",
        "sasl_oauthbearer_client_secret": "cs",
        "sasl_oauthbearer_scope": "kafka",
    }
    with pytest.raises(errors.ConfigurationError, match="Krb5LoginModule is not supported"):
        parse_jaas_config("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;")
    with pytest.raises(errors.ConfigurationError) as info:
        parse_jaas_config(f'username="alice" password="{SECRET}"')  # no module, no flag
    assert SECRET not in str(info.value)


def test_librdkafka_names() -> None:
    props = {
        "bootstrap.servers": "h:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "key",
        "sasl.password": SECRET,
        "ssl.endpoint.identification.algorithm": "",
    }
    cfg = config_from_properties(props)
    assert (cfg.sasl_mechanism, cfg.sasl_plain_username, cfg.sasl_plain_password) == (
        "PLAIN",
        "key",
        SECRET,
    )
    assert cfg.ssl_check_hostname is False
    assert cfg.security.ssl_context is not None and not cfg.security.ssl_context.check_hostname


def test_file_properties_map_onto_the_ssl_files(pki: dict[str, Path]) -> None:
    cfg = config_from_properties(
        {
            "bootstrap.servers": "h:9093",
            "security.protocol": "SSL",
            "ssl.truststore.location": str(pki["ca"]),
            "ssl.truststore.type": "PEM",
            "ssl.certificate.location": str(pki["cert"]),
            "ssl.key.location": str(pki["encrypted_key"]),
            "ssl.key.password": SECRET,
        }
    )
    assert (cfg.ssl_cafile, cfg.ssl_certfile, cfg.ssl_keyfile) == (
        str(pki["ca"]),
        str(pki["cert"]),
        str(pki["encrypted_key"]),
    )
    with pytest.raises(errors.ConfigurationError, match="PEM"):
        config_from_properties({"security.protocol": "SSL", "ssl.truststore.type": "JKS"})
    with pytest.raises(errors.ConfigurationError, match="ssl.endpoint.identification.algorithm"):
        config_from_properties({"ssl.endpoint.identification.algorithm": "http"})


def test_java_oidc_properties() -> None:
    cfg = config_from_properties(
        {
            "bootstrap.servers": "h:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'clientId="svc" clientSecret="{SECRET}" scope="kafka";'
            ),
        }
    )
    assert (cfg.sasl_oauthbearer_client_id, cfg.sasl_oauthbearer_scope) == ("svc", "kafka")
    assert cfg.sasl_oauthbearer_client_secret == SECRET
    with pytest.raises(errors.ConfigurationError, match="sasl_oauth_token_provider"):
        config_from_properties({"sasl.login.callback.handler.class": "com.example.MyHandler"})


def test_oidc_properties() -> None:
    cfg = config_from_properties(
        {
            "bootstrap.servers": "h:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
            "sasl.oauthbearer.client.id": "svc",
            "sasl.oauthbearer.client.secret": SECRET,
            "sasl.oauthbearer.scope": "kafka",
        }
    )
    provider = cfg.security.sasl.token_provider  # type: ignore[union-attr]
    assert provider is not None and "svc" in repr(provider) and SECRET not in repr(provider)


# -- secrets stay hidden ---------------------------------------------------------


def test_secrets_never_in_repr_or_logs(
    caplog: pytest.LogCaptureFixture, pki: dict[str, Path]
) -> None:
    caplog.set_level(logging.DEBUG)
    producers = [
        Producer(
            "h:9093",
            security_protocol="SASL_SSL",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=SECRET,
        ),
        Producer(
            "h:9093",
            security_protocol="SSL",
            ssl_certfile=str(pki["cert"]),
            ssl_keyfile=str(pki["encrypted_key"]),
            ssl_password=SECRET,
        ),
        Producer(
            "h:9093",
            security_protocol="SASL_SSL",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauthbearer_token_endpoint_url="https://idp.example/t",
            sasl_oauthbearer_client_id="svc",
            sasl_oauthbearer_client_secret=SECRET,
        ),
    ]
    for p in producers:
        for text in (repr(p), repr(p.config), str(p.config), repr(p.config.security)):
            assert SECRET not in text, text
    assert "alice" in repr(producers[0].config)  # the user name is not a secret
    assert "security=SASL_SSL/PLAIN" in repr(producers[0])
    assert SECRET not in caplog.text


def test_config_repr_is_still_informative() -> None:
    cfg = ProducerConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password=SECRET,
    ).validate()
    assert "security_protocol='SASL_PLAINTEXT'" in repr(cfg) and "sasl_mechanism='PLAIN'" in repr(
        cfg
    )
