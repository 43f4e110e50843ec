"""PyTorch's CPU index, stood in for at its own URL, for installers run by a test.

PyTorch's index cannot be reached from where the tests run, and what is to be checked is the
installers' own choice of it (uv's --torch-backend=cpu names no URL; the README's pip line names
the real one). So the installer runs with a loopback HTTPS proxy in its environment: a CONNECT to
the CPU index's host is answered here, over TLS with a certificate from a throwaway CA that only
that process trusts, by a one-package simple index holding the given torch wheel; every other
CONNECT (PyPI) is passed through unchanged. Each request is logged, so a test can see what was
asked of which index.
"""

from __future__ import annotations

import asyncio
import atexit
import datetime
import hashlib
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HOST = "download.pytorch.org"
PREFIX = "/whl/cpu/"  # the CPU index is https://download.pytorch.org/whl/cpu


_downloads: list[Path] = []  # the one folder a test process downloaded torch into


def torch_wheel(folder: Path, pattern: str = "torch-*.whl") -> Path:
    """The torch 2.13.0 wheel pip installs here (the machine's CPU build), linked into `folder`. It is
    downloaded once per test process: a copy of its 190 MB for each test filled a CI machine's disk."""
    if not _downloads:
        downloads = Path(tempfile.mkdtemp(prefix="corrigenda-torch-"))
        atexit.register(shutil.rmtree, downloads, True)
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "torch==2.13.0", "-d", str(downloads)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert pip.returncode == 0, pip.stderr[-2000:]
        _downloads.append(downloads)
    (wheel,) = _downloads[0].glob(pattern)
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / wheel.name
    link.symlink_to(wheel)
    return link


def local_torch_index(tmp: Path) -> str:
    """A one-package simple index (PEP 503) on disk holding that wheel, standing in for PyTorch's CPU
    index where a file URL will do (a project's own configuration names the index)."""
    wheel = torch_wheel(tmp / "wheels")
    page = tmp / "simple" / "torch" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<html><body><a href="{wheel.as_uri()}">{wheel.name}</a></body></html>\n', encoding="utf-8")
    return (tmp / "simple").as_uri()


@dataclass
class StandIn:
    env: dict[str, str]  # the installer's environment: the proxy and the trust it needs
    log: Path  # one line a request: "HOST METHOD PATH", or "CONNECT host:port"

    @property
    def requests(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines()


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for HOST that it signed: (CA file, leaf chain file, leaf key file)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corrigenda test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # key_cert_sign, crl_sign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, chain_file, key_file = directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key"
    ca_file.write_bytes(ca.public_bytes(pem))
    chain_file.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return ca_file, chain_file, key_file


def _trust_bundle(ca_file: Path, directory: Path) -> Path:
    """The certificates this machine trusts, and the test CA."""
    system = os.environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().cafile
    if not system or not Path(system).is_file():
        import certifi

        system = certifi.where()
    bundle = directory / "bundle.pem"
    bundle.write_bytes(Path(system).read_bytes().rstrip(b"\n") + b"\n" + ca_file.read_bytes())
    return bundle


class _Index:
    """The simple index (PEP 503, with PEP 658 metadata) of one torch wheel."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        with zipfile.ZipFile(wheel) as zipped:
            (name,) = [n for n in zipped.namelist() if n.endswith(".dist-info/METADATA")]
            self.metadata = zipped.read(name)
        digest = hashlib.sha256()
        with wheel.open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        meta = hashlib.sha256(self.metadata).hexdigest()
        href = f"{PREFIX}{urllib.parse.quote(wheel.name)}#sha256={digest.hexdigest()}"
        self.page = (
            f'<html><body><a href="{href}" data-dist-info-metadata="sha256={meta}" '
            f'data-core-metadata="sha256={meta}">{wheel.name}</a></body></html>\n'
        ).encode()

    def answer(self, path: str) -> tuple[str, bytes | Path]:
        if path.rstrip("/") == PREFIX + "torch":
            return "200 OK", self.page
        if path == PREFIX + self.wheel.name + ".metadata":
            return "200 OK", self.metadata
        if path == PREFIX + self.wheel.name:
            return "200 OK", self.wheel
        return "404 Not Found", b"not found\n"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    writer.close()


async def _serve(wheel: Path, chain_file: Path, key_file: Path, log_file: Path) -> None:
    """The proxy, on a free loopback port that it prints first."""
    index = _Index(wheel)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(chain_file, key_file)
    tls.set_alpn_protocols(["http/1.1"])
    log = log_file.open("a", encoding="utf-8", buffering=1)

    async def serve_index(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:  # keep-alive: one request after another until the client closes
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            path = urllib.parse.unquote(target)
            log.write(f"{HOST} {method} {path}\n")
            status, body = index.answer(path)
            size = body.stat().st_size if isinstance(body, Path) else len(body)
            kind = "text/html" if body is index.page else "application/octet-stream"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {size}\r\n\r\n".encode())
            if method != "HEAD" and isinstance(body, Path):
                with body.open("rb") as file:
                    while block := file.read(1 << 20):
                        writer.write(block)
                        await writer.drain()
            elif method != "HEAD":
                assert isinstance(body, bytes)
                writer.write(body)
            await writer.drain()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(OSError, asyncio.IncompleteReadError, ssl.SSLError, ValueError):
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            log.write(f"CONNECT {target}\n")
            host, port = target.rsplit(":", 1)
            if host == HOST:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await writer.start_tls(tls)
                await serve_index(reader, writer)
            else:
                upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


@contextmanager
def pytorch_cpu_index(wheel: Path) -> Iterator[StandIn]:
    """Serve `wheel` as PyTorch's CPU index for as long as the block runs. The proxy is a process
    of its own: the test process may reach loopback only (conftest.py), and the proxy passes the
    installer's other connections on, as the installer would make them itself."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        ca_file, chain_file, key_file = _certificates(directory)
        bundle = str(_trust_bundle(ca_file, directory))
        log = directory / "requests.log"
        log.touch()
        proxy = subprocess.Popen(
            [sys.executable, __file__, str(wheel), str(chain_file), str(key_file), str(log)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proxy.stdout is not None
            port = int(proxy.stdout.readline())
            address = f"http://127.0.0.1:{port}"
            yield StandIn(
                env={
                    "HTTPS_PROXY": address,
                    "https_proxy": address,
                    "SSL_CERT_FILE": bundle,  # uv
                    "PIP_CERT": bundle,  # pip
                    "REQUESTS_CA_BUNDLE": bundle,  # pip again: requests prefers it to --cert
                },
                log=log,
            )
        finally:
            proxy.terminate()
            proxy.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(_serve(*(Path(a) for a in sys.argv[1:5])))
