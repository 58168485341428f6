"""daphne as this project runs it: ``python -m chatapp.webserver`` takes daphne's arguments.

    python -m chatapp.webserver -b 127.0.0.1 -p 8000 chatapp.asgi:application

daphne (autobahn underneath) keeps a WebSocket message whole and hands it to the application,
or, past ``--websocket-max-message-size`` (1 MiB by default), drops the TCP connection: a client
that sent a long message lost its socket with no word why, and the chat page, which sends again
what it has not seen answered, sent it again on every reconnect.

Here a message longer than any frame of the chat protocol can be
(``agents_app.chat.protocol.websocket_read_max_bytes``) is read to its end without being kept,
and the application gets a ``websocket.receive.too_large`` event with its length instead of its
content: the consumer answers ``frame_too_large`` and the socket stays open. Only a message past
``--websocket-max-message-size`` (``WEBSOCKET_DISCARD_MAX_BYTES`` here) is refused unread: the
socket is closed with 1009 ("message too big") and a reason (docs/websocket-protocol.md).

An HTTP request line longer than Twisted reads (16 KiB: a 20,000-character query string)
dropped the connection with no answer; it is answered ``414 URI Too Long`` now, a header line
that long ``431 Request Header Fields Too Large``, and the connection closed. A body longer
than ``REQUEST_BODY_MAX_BYTES`` was read and spooled in full before any view could refuse it;
it is answered ``413 Content Too Large`` unread.
"""

from __future__ import annotations

import daphne.server  # isort: skip  (installs the asyncio reactor before Twisted is imported)
import re
import time
from typing import Any

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
from twisted.web.http import HTTPChannel

TOO_LARGE = "websocket.receive.too_large"
# Longer messages, and frames, are refused unread; shorter ones are read (and dropped).
WEBSOCKET_DISCARD_MAX_BYTES = 128 * 1024 * 1024


class BoundedReadWebSocketProtocol(WebSocketProtocol):
    """A WebSocket that keeps a message only up to its server's ``read_max_bytes``: a longer
    one is dropped as it arrives and the application hears of it as a ``too_large`` event,
    so a client's message costs the server that much memory at most."""

    server: Server

    def onMessageBegin(self, isBinary: bool) -> None:
        super().onMessageBegin(isBinary)
        self.message_dropped = False

    def onMessageFrameBegin(self, length: int) -> None:
        super().onMessageFrameBegin(length)
        if not self.message_dropped and self.message_data_total_length > self.server.read_max_bytes:
            self.message_dropped = True
            self.message_data = []
            # Validating UTF-8 that is thrown away would cost more than reading it.
            self.utf8validateIncomingCurrentMessage = False

    def onMessageFrameData(self, payload: bytes) -> None:
        if not self.message_dropped:
            super().onMessageFrameData(payload)

    def onMessageEnd(self) -> None:
        if not self.message_dropped:
            super().onMessageEnd()
            return
        self.message_data = None
        if self.failedByMe or self.muted:
            return
        self.last_ping = time.time()
        self.application_queue.put_nowait(
            {
                "type": TOO_LARGE,
                "bytes_received": self.message_data_total_length,
                "binary": self.message_is_binary,
            }
        )


# A request line starts with its method, a token, and a space; a header line has no space
# before its colon.
REQUEST_LINE_START = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+ ")
TOO_LONG_ANSWERS = {
    True: (b"414 URI Too Long", b"The request line (the URL) is too long."),
    False: (b"431 Request Header Fields Too Large", b"A request header is too long."),
}


TOO_LARGE_BODY = (b"413 Content Too Large", b"The request body is too large.")


class BoundedLineHTTPChannel(HTTPChannel):
    """Twisted's HTTP/1.1 channel, answering a line longer than it reads (``MAX_LENGTH``)
    with 414 (the request line) or 431 (a header) instead of dropping the connection, and a
    body past its server's ``body_max_bytes`` with 413 before it is read: at once for a
    ``Content-Length`` over it, as soon as that much arrived for a chunked one."""

    _body_received = 0
    _refused = False

    def lineLengthExceeded(self, line: bytes) -> None:
        self._refuse(*TOO_LONG_ANSWERS[bool(REQUEST_LINE_START.match(line))])

    def _refuse(self, status: bytes, body: bytes) -> None:
        self._refused = True
        self.transport.write(
            b"HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (status, len(body), body)
        )
        self.transport.loseConnection()

    def allHeadersReceived(self) -> None:
        self._body_received = 0
        if self.length is not None and self.length > self.factory.server.body_max_bytes:
            self._refuse(*TOO_LARGE_BODY)
            return
        super().allHeadersReceived()

    def rawDataReceived(self, data: bytes) -> None:
        if self._refused:
            return
        if not self._handlingRequest:
            self._body_received += len(data)
            if self._body_received > self.factory.server.body_max_bytes:
                self._refuse(*TOO_LARGE_BODY)
                return
        super().rawDataReceived(data)


class Server(daphne.server.Server):
    """daphne's server, with the HTTP channels and the WebSockets above."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Imported here: the application, loaded before the server is made, set Django up.
        from django.conf import settings

        from agents_app.chat.protocol import websocket_read_max_bytes

        self.read_max_bytes = websocket_read_max_bytes()
        self.body_max_bytes = settings.REQUEST_BODY_MAX_BYTES

    @property
    def http_factory(self) -> HTTPFactory:
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory: HTTPFactory) -> None:
        """Set by daphne's ``run``: its factory builds the HTTP/1.1 channels above (daphne
        serves HTTP/2 only over TLS with the ``h2`` extra, which this project does not use)."""
        factory.protocol = BoundedLineHTTPChannel
        self._http_factory = factory

    @property
    def ws_factory(self) -> WebSocketFactory:
        return self._ws_factory

    @ws_factory.setter
    def ws_factory(self, factory: WebSocketFactory) -> None:
        """Set by daphne's ``run``: its factory builds the sockets above, and a socket failed
        by the protocol (a message past the limit) is closed with a code and a reason instead
        of being dropped."""
        factory.protocol = BoundedReadWebSocketProtocol
        factory.setProtocolOptions(failByDrop=False)
        self._ws_factory = factory


class WebServerCommandLine(CommandLineInterface):
    description = "daphne, reading WebSocket messages up to the chat's limit (chatapp.webserver)"
    server_class = Server

    def __init__(self) -> None:
        super().__init__()
        self.parser.set_defaults(
            websocket_max_message_size=WEBSOCKET_DISCARD_MAX_BYTES,
            websocket_max_frame_size=WEBSOCKET_DISCARD_MAX_BYTES,
        )


if __name__ == "__main__":
    WebServerCommandLine.entrypoint()
