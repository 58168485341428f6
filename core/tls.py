"""One TLS context a process for the model providers' HTTP clients."""

from __future__ import annotations

import functools
import ssl

import httpx2


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificate authorities' context every model client of this process verifies with.

    Making a context reads the authorities' bundle again, about 20 ms of processor time, and
    a client is made for every chat socket and every background job (each on the event loop
    it runs on, so clients themselves cannot be shared). A context can: it holds no
    connection. It honours ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` as the clients' own would.
    """
    return httpx2.create_ssl_context()
