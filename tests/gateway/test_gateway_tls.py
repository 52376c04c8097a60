"""Real providers are reached over TLS with the certificate verified: an upstream whose
certificate no trusted CA signed is refused (502, nothing sent); one a trusted CA signed works."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest

from gateway_support import send, sock_dir  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import Gateway, Upstream


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A throwaway CA and a certificate for 127.0.0.1 it signed (openssl, as shipped by Debian)."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed: apt-get install -y openssl", pytrace=False)
    folder = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=evalq test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
            "server.key", "-out", "server.csr")
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.pem")
    return folder


def tls_server(certificates, script) -> ModelServer:
    server = ModelServer(script)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    return server


def test_https_upstream_certificate_is_verified(certificates, sock_dir):
    usage = {"input_tokens": 21, "output_tokens": 4}
    script = parse_script({"fallback": {"text": "over tls", "usage": usage}})
    with tls_server(certificates, script) as server:
        url = server.url.replace("http:", "https:")
        body = {"model": "gpt-5", "messages": [], "stream": True,
                "stream_options": {"include_usage": True}}
        with Gateway() as untrusting:  # system CAs only: the test CA is not among them
            untrusting.open_run("u", sock_dir / "u.sock", upstreams=[Upstream(url)])
            reply = send(str(sock_dir / "u.sock"), "/v1/chat/completions", body)
            assert reply.status == 502 and "Certificate" in reply.json()["error"]["message"]
        assert server.exchanges == []
        trusting = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
        with Gateway(ssl_context=trusting) as gateway:
            run = gateway.open_run("t", sock_dir / "t.sock", upstreams=[Upstream(url)])
            reply = send(str(sock_dir / "t.sock"), "/v1/chat/completions", body)
            assert reply.status == 200 and b"over tls" in reply.raw
            assert run.records()[0]["input_tokens"] == 21
            assert run.records()[0]["output_tokens"] == 4
