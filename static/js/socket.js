// The chat WebSocket (docs/websocket-protocol.md): reconnects with backoff and re-sends every
// message whose turn_complete it has not seen, with the same client_message_id, so the server
// replays that turn instead of running it twice.

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10000;
// The close code of a message too long for the server to read at all (docs/websocket-protocol.md).
const MESSAGE_TOO_BIG = 1009;
const TOO_BIG_MESSAGE = "The message is too long to send; shorten it and send it again.";

/** A client_message_id: 32 hex digits (the protocol allows 1-64 of [A-Za-z0-9_-]). */
export function newClientMessageId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * One chat session's socket.
 *
 * Callbacks: onFrame(frame) for every server frame; onStatus(state, detail) with state
 * "connecting", "open" or "waiting" (detail: seconds until the next try). After a
 * connection attempt fails, checkFatal() resolves to a message when retrying is pointless
 * (the session was deleted, the user signed out): retries stop and onFatal(message) is called.
 */
export class ChatSocket {
  constructor(url, { onFrame, onStatus, checkFatal, onFatal }) {
    this.url = url;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.checkFatal = checkFatal;
    this.onFatal = onFatal;
    this.unacknowledged = new Map();
    this.failures = 0;
    this.socket = null;
    this.retryTimer = null;
    this.closed = false;
    this.reconnectNow = () => {
      if (this.retryTimer !== null) {
        clearTimeout(this.retryTimer);
        this.connect();
      }
    };
    window.addEventListener("online", this.reconnectNow);
  }

  connect() {
    this.retryTimer = null;
    if (this.closed) {
      return;
    }
    this.onStatus("connecting");
    const socket = new WebSocket(this.url);
    let opened = false;
    this.socket = socket;
    socket.addEventListener("open", () => {
      opened = true;
      this.failures = 0;
      this.onStatus("open");
      for (const frame of this.unacknowledged.values()) {
        socket.send(JSON.stringify(frame));
      }
    });
    socket.addEventListener("message", (message) => this.receive(message.data));
    socket.addEventListener("close", (event) => {
      if (event.code === MESSAGE_TOO_BIG && this.socket === socket) {
        // The server refused a message unread: said like its frame_too_large, so the
        // message is given back instead of being sent again on reconnect.
        this.onFrame({ type: "error", code: "frame_too_large", message: TOO_BIG_MESSAGE });
      }
      if (this.socket === socket) {
        this.socket = null;
        this.retry(opened);
      }
    });
  }

  receive(data) {
    if (this.closed) {
      return;
    }
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.type === "turn_complete") {
      this.unacknowledged.delete(frame.client_message_id);
    }
    this.onFrame(frame);
  }

  async retry(wasOpen) {
    if (this.closed) {
      return;
    }
    const fatal = wasOpen ? null : await this.checkFatal();
    if (this.closed) {
      return;
    }
    if (fatal) {
      this.close();
      this.onFatal(fatal);
      return;
    }
    const base = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** this.failures);
    const delay = Math.round(base * (0.75 + Math.random() / 2));
    this.failures += 1;
    this.onStatus("waiting", Math.ceil(delay / 1000));
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  /** Send a user message now, or as soon as the socket is open; kept until its turn completes. */
  sendMessage(clientMessageId, text, attachments = []) {
    const frame = { type: "user_message", text, client_message_id: clientMessageId };
    if (attachments.length) {
      frame.attachments = attachments;
    }
    this.unacknowledged.set(clientMessageId, frame);
    this.sendIfOpen(frame);
  }

  /** Ask for an interrupted or failed turn to run again (or an open one to resume); kept, like
   *  a message, until its turn completes, and sent again on reconnect (the server runs it once). */
  retryTurn(clientMessageId) {
    const frame = { type: "retry", client_message_id: clientMessageId };
    this.unacknowledged.set(clientMessageId, frame);
    this.sendIfOpen(frame);
  }

  /** Edit a sent message (`{type: "edit", message_id, text}`) or regenerate the last reply
   *  (`{type: "regenerate", message_id}`) as the turn of a new client message; kept and sent
   *  again on reconnect like a message (the server rewinds and runs it once). */
  rewriteTurn(clientMessageId, frame) {
    const full = { ...frame, client_message_id: clientMessageId };
    this.unacknowledged.set(clientMessageId, full);
    this.sendIfOpen(full);
  }

  /** Forget a message the server refused, so that it is not sent again on reconnect. */
  forget(clientMessageId) {
    this.unacknowledged.delete(clientMessageId);
  }

  cancel() {
    this.sendIfOpen({ type: "cancel" });
  }

  sendIfOpen(frame) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(frame));
    }
  }

  /** Close for good: no more frames, callbacks or retries. */
  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    window.removeEventListener("online", this.reconnectNow);
    if (this.socket) {
      const socket = this.socket;
      this.socket = null;
      socket.close(1000);
    }
  }
}
