"""TLS contexts: kgc's listeners (server side, optional client certificates) and its
connections upstream (client side, CA and host-name check, optional client certificate).

Certificates are reloaded without a restart. Every handshake passes through the
listening context's `sni_callback` (also when the client sends no SNI), which moves the
handshake onto the newest context; `ServerTls.reload_if_changed` builds a new context
when a file changed and swaps the reference. A live context is never mutated, so
connections already made keep theirs. A changed file that does not load (half-written,
wrong key) keeps the last good context and logs why.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

from coordinator.security.files import stamp

log = logging.getLogger(__name__)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
HANDSHAKE_TIMEOUT_S = 10.0


class TlsError(ValueError):
    """A certificate, key or CA file that cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class ServerTlsFiles:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_auth: str = "none"          # none | requested | required


def _load(ctx: ssl.SSLContext, what: str, load, *files: str | None) -> None:
    try:
        load()
    except (OSError, ssl.SSLError) as exc:
        named = ", ".join(f for f in files if f)
        raise TlsError(f"cannot load {what} ({named}): {exc}") from None


class ServerTls:
    """The TLS side of every kgc listener, reloadable."""

    def __init__(self, files: ServerTlsFiles):
        self._files = files
        self._stamp = self._stamps()
        self._current = self._build()            # a bad file at start-up is an error
        self.context = self._current             # what the listeners serve with

    def _build(self) -> ssl.SSLContext:
        f = self._files
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        _load(ctx, "the server certificate and key", lambda: ctx.load_cert_chain(f.cert_file, f.key_file),
              f.cert_file, f.key_file)
        if f.client_auth != "none":
            _load(ctx, "the client CA", lambda: ctx.load_verify_locations(cafile=f.client_ca_file), f.client_ca_file)
            ctx.verify_mode = CLIENT_AUTH[f.client_auth]
        ctx.sni_callback = self._use_newest
        return ctx

    def _use_newest(self, ssl_object: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        if ctx is not self._current:
            ssl_object.context = self._current

    def _stamps(self) -> tuple:
        f = self._files
        return tuple(stamp(path) for path in (f.cert_file, f.key_file, f.client_ca_file))

    def reload_if_changed(self) -> bool:
        stamp = self._stamps()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            self._current = self._build()
        except TlsError as exc:
            log.error("keeping the previous TLS certificate: %s", exc)
            return False
        log.info("TLS certificate reloaded from %s", self._files.cert_file)
        return True


def client_context(ca_file: str | None, cert_file: str | None = None, key_file: str | None = None, *,
                   check_hostname: bool = True) -> ssl.SSLContext:
    """kgc's side of a TLS connection upstream: the broker's certificate is checked
    against `ca_file` (the system's CAs when None) and, unless told otherwise, its name."""
    ctx = ssl.create_default_context(cafile=None)
    if ca_file:
        _load(ctx, "the upstream CA", lambda: ctx.load_verify_locations(cafile=ca_file), ca_file)
    if cert_file:
        _load(ctx, "kgc's client certificate", lambda: ctx.load_cert_chain(cert_file, key_file), cert_file, key_file)
    ctx.check_hostname = check_hostname
    return ctx


def peer_certificate(transport) -> bytes | None:
    """The client's certificate (DER) on a TLS connection that presented one."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True)
