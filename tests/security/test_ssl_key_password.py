"""An encrypted client key without ``ssl_password`` never prompts for a pass phrase.

OpenSSL, given no password for an encrypted PEM key, asks on the terminal
("Enter PEM pass phrase:") and waits forever, or reads its standard input when
there is no terminal. Each check runs the construction in a child process
(a regression must not hang the test run): once with standard input a pipe
that never delivers a byte and no controlling terminal, once with a
pseudo-terminal as its controlling terminal. Either way the typed error must
come at once, naming the key file and ssl_password, and no prompt may appear.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from aioproducer import Producer, errors

REPO = Path(__file__).resolve().parents[2]
PASS_PHRASE = "key-Pass-7"
BOUND_S = 30.0  # the child imports aioproducer; a prompt would wait forever

CHILD = """
import sys
from aioproducer import Producer, errors
try:
    Producer("h:9093", security_protocol="SSL", ssl_certfile=sys.argv[1], ssl_keyfile=sys.argv[2])
except errors.ConfigurationError as exc:
    print("ConfigurationError:", exc, flush=True)
except BaseException as exc:
    print("OTHER:", type(exc).__name__, exc, flush=True)
else:
    print("LOADED", flush=True)
"""

PTY_CHILD = "import fcntl, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n" + CHILD


@pytest.fixture(scope="module")
def key_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("keys")
    cert = trustme.CA().issue_cert("client.example")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    files = {
        "cert": root / "client.pem",
        "pkcs8": root / "client-pkcs8.key",
        "traditional": root / "client-traditional.key",
    }
    cert.cert_chain_pems[0].write_to_path(files["cert"])
    for name, fmt in (
        ("pkcs8", serialization.PrivateFormat.PKCS8),
        ("traditional", serialization.PrivateFormat.TraditionalOpenSSL),
    ):
        files[name].write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                fmt,
                serialization.BestAvailableEncryption(PASS_PHRASE.encode()),
            )
        )
    return {k: str(v) for k, v in files.items()}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _check_refusal(output: str, keyfile: str) -> None:
    assert "enter pem pass phrase" not in output.lower(), output
    assert output.startswith("ConfigurationError:"), output
    assert repr(keyfile) in output and "set ssl_password" in output, output


@pytest.mark.parametrize("form", ["pkcs8", "traditional"])
def test_no_prompt_when_stdin_is_a_silent_pipe(key_files: dict[str, str], form: str) -> None:
    read_end, write_end = os.pipe()  # the write end stays open and silent
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, key_files["cert"], key_files[form]],
            stdin=read_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=_env(),
            cwd=REPO,
        )
        os.close(read_end)
        try:
            out, err = child.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            pytest.fail(f"no answer within {BOUND_S} s: waiting for a pass phrase? {err!r}")
    finally:
        os.close(write_end)
    _check_refusal(out.decode() + err.decode(), key_files[form])


def test_no_prompt_on_a_terminal(key_files: dict[str, str]) -> None:
    import pty

    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", PTY_CHILD, key_files["cert"], key_files["pkcs8"]],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=_env(),
        cwd=REPO,
    )
    os.close(slave)
    terminal = b""
    deadline = time.monotonic() + BOUND_S
    try:
        while child.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    terminal += os.read(master, 4096)
                except OSError:  # the child closed its end
                    break
        if child.poll() is None and time.monotonic() >= deadline:
            child.kill()
            child.communicate()
            pytest.fail(f"no answer within {BOUND_S} s; the terminal shows {terminal!r}")
        out, err = child.communicate(timeout=BOUND_S)
    finally:
        os.close(master)
    assert b"enter pem pass phrase" not in terminal.lower(), terminal
    _check_refusal(out.decode() + err.decode(), key_files["pkcs8"])


def test_wrong_password_is_a_configuration_error(key_files: dict[str, str]) -> None:
    with pytest.raises(errors.ConfigurationError, match="ssl_password does not decrypt") as info:
        Producer(
            "h:9093",
            security_protocol="SSL",
            ssl_certfile=key_files["cert"],
            ssl_keyfile=key_files["pkcs8"],
            ssl_password="not-" + PASS_PHRASE,
        )
    assert repr(key_files["pkcs8"]) in str(info.value)
    assert PASS_PHRASE not in str(info.value) and info.value.__cause__ is None
    # The right one loads.
    Producer(
        "h:9093",
        security_protocol="SSL",
        ssl_certfile=key_files["cert"],
        ssl_keyfile=key_files["pkcs8"],
        ssl_password=PASS_PHRASE,
    )
