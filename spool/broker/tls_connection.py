"""A connection on an SSL or SASL_SSL listener: ``Connection`` with TLS underneath.

TLS runs sans-I/O (``ssl.SSLObject`` over two ``MemoryBIO``s) on the same raw
non-blocking socket, so everything ``spool.broker.server.Connection`` does (framing,
ordering, backpressure, hang-up detection) is unchanged; only three things differ, and
the plaintext path does not pay for them:

- Before reading requests, the handshake, bounded by the server's
  ``tls_handshake_timeout_s``; waiting for the client's bytes yields to the loop, so a
  slow or silent client holds only its own connection. A failure (a plaintext client,
  an untrusted or missing client certificate with ``ssl.client.auth=required``, a
  timeout) closes the connection with one log line, no traceback. On an SSL listener
  the client certificate's subject, through ``ssl.principal.mapping.rules``, becomes
  ``principal`` (no certificate: ``User:ANONYMOUS``, as Kafka).
- Receiving: ``_recv_into`` decrypts what the socket has into the server's buffer
  (raising ``BlockingIOError`` only when neither TLS nor the socket holds a byte).
- Sending: bytes are encrypted in the order given; a ``FileRegion`` is read from the
  segment with ``pread`` and encrypted (no ``sendfile``: Python 3.11's ``ssl`` has no
  kernel TLS), ``TLS_CHUNK`` bytes at a time so a large fetch does not sit in memory
  twice. Encrypted bytes leave in order: the writer sends them; bytes TLS itself makes
  while reading (TLS 1.3 key updates) go out at once if the writer is not sending,
  else after its send.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time

from spool.broker.server import (
    _BYTES,
    Connection,
    FileRegion,
    SendHook,
    _close_regions,
    _readable,
    _sent,
)
from spool.security.principal import ANONYMOUS, user
from spool.security.ssl_principal import NoMatchingRule, subject_dn
from spool.security.tls import ServerTls

TLS_CHUNK = 256 * 1024  # plaintext bytes encrypted before they are sent


class TlsHandshakeError(ConnectionError):
    """The handshake failed; ``str(e)`` says why."""


class TlsConnection(Connection):
    """``Connection`` over TLS (module doc)."""

    def __init__(self, server, sock: socket.socket, peer: tuple, listener_name: str,
                 tls: ServerTls) -> None:
        super().__init__(server, sock, peer, listener_name)
        self.tls = tls
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.ssl_object: ssl.SSLObject = tls.context.wrap_bio(
            self._incoming, self._outgoing, server_side=True)
        # the server's one buffer for encrypted bytes (copied into the BIO at once)
        self._raw: memoryview = server.tls_recv_view
        self._out = bytearray()  # encrypted bytes not sent yet
        self._sending = False
        self._recv_into = self._tls_recv_into

    async def run(self) -> None:
        try:
            await asyncio.wait_for(self._handshake(), self.server.tls_handshake_timeout_s)
            self._set_principal()
        except TimeoutError:
            self.reason = (f"TLS handshake not done after "
                           f"{self.server.tls_handshake_timeout_s:g} s")
        except (TlsHandshakeError, NoMatchingRule) as e:
            self.reason = str(e)
        except ssl.SSLError as e:
            self._push()  # the alert OpenSSL wrote, so the client sees why
            self.reason = f"TLS handshake failed: {e.reason or e}"
        except OSError as e:
            self.reason = f"TLS handshake failed: {e}"
        else:
            await super().run()
            return
        self._teardown()

    def _set_principal(self) -> None:
        if self.tls.mapper is None:
            return
        der = self.ssl_object.getpeercert(binary_form=True)
        if not der:
            self.principal = ANONYMOUS
            return
        self.principal = user(self.tls.mapper.name(subject_dn(der)))

    async def _handshake(self) -> None:
        sslobj = self.ssl_object
        while True:
            try:
                sslobj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            await self._flush()
            while True:
                try:
                    n = self.sock.recv_into(self._raw)
                    break
                except (BlockingIOError, InterruptedError):
                    await _readable(self._loop, self.fd)
            if n == 0:
                raise TlsHandshakeError("the client closed the connection during the TLS "
                                        "handshake")
            self._incoming.write(self._raw[:n])
        await self._flush()

    # ---- receiving

    def _tls_recv_into(self, buf: bytearray) -> int:
        """Like ``socket.recv_into``: decrypted bytes into ``buf``, 0 at the end."""
        sslobj = self.ssl_object
        view = self.server.recv_view if buf is self.server.recv_buf else memoryview(buf)
        size = len(buf)
        total = 0
        try:
            while total < size:
                try:
                    n = sslobj.read(size - total, view[total:])
                except ssl.SSLWantReadError:
                    if total:
                        break
                    raw = self.sock.recv_into(self._raw)  # BlockingIOError: nothing to read
                    if raw == 0:
                        break
                    self._incoming.write(self._raw[:raw])
                    continue
                except ssl.SSLZeroReturnError:  # close_notify
                    break
                if n == 0:
                    break
                total += n
        except ssl.SSLError as e:
            self.reason = self.reason or f"TLS error: {e.reason or e}"
            raise
        if self._outgoing.pending:
            self._push()
        return total

    # ---- sending

    def _push(self) -> None:
        """Send what TLS wrote, without waiting; the writer sends what is left."""
        if self._outgoing.pending:
            self._out += self._outgoing.read()
        if self._sending or not self._out:
            return
        try:
            n = self.sock.send(self._out)
        except OSError:
            return
        del self._out[:n]

    async def _flush(self) -> None:
        """Send every encrypted byte, in order, waiting for the socket."""
        self._sending = True
        try:
            while self._out or self._outgoing.pending:
                if self._out:
                    data = bytes(self._out) + self._outgoing.read()
                    self._out.clear()
                else:
                    data = self._outgoing.read()
                await self._loop.sock_sendall(self.sock, data)
        finally:
            self._sending = False

    async def _send(self, chunks: list) -> None:
        write = self.ssl_object.write
        small = bytearray()
        hooks: list[SendHook] = []
        send_start = time.perf_counter()
        try:
            for i, c in enumerate(chunks):
                if isinstance(c, _BYTES):
                    small += c
                    if len(small) >= TLS_CHUNK:
                        write(small)
                        small = bytearray()
                        await self._flush()
                    continue
                if isinstance(c, SendHook):
                    hooks.append(c)
                    continue
                if small:
                    write(small)
                    small = bytearray()
                await self._send_region(c)
                chunks[i] = b""
            if small:
                write(small)
            await self._flush()
        finally:
            _close_regions(chunks)
        if hooks:
            _sent(hooks, send_start)

    async def _send_region(self, region: FileRegion) -> None:
        write = self.ssl_object.write
        position, remaining = region.position, region.length
        while remaining > 0:
            data = os.pread(region.fd, min(remaining, TLS_CHUNK), position)
            if not data:  # the file shrank under us: the frame can't be completed
                raise ConnectionError("segment file truncated while sending a fetch")
            write(data)
            position += len(data)
            remaining -= len(data)
            await self._flush()
        region.close()
