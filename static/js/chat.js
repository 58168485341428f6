// The chat page: wires the session list, the conversation, the socket and the side panel.

import { SessionsApi } from "./api.js";
import { AttachmentTray, attachmentList } from "./attachments.js";
import {
  appendDelta,
  actionButton,
  completeToolSteps,
  editForm,
  editLossNote,
  element,
  eventEntry,
  interruptedNote,
  noteOn,
  renderContext,
  renderEmpty,
  renderPending,
  renderState,
  streamingEntry,
  userEntry,
} from "./render.js";
import { ChatSearch } from "./search.js";
import { Sidebar } from "./sidebar.js";
import { ChatSocket, newClientMessageId } from "./socket.js";

const NARROW = window.matchMedia("(max-width: 800px)");
const AUTO_TITLE_CHARS = 60;
const STICK_TO_BOTTOM_PX = 80;
const CONNECTION_TEXT = {
  idle: "",
  connecting: "Connecting…",
  open: "Connected",
  waiting: (seconds) => `Connection lost, retrying in ${seconds} s…`,
};

const config = JSON.parse(document.getElementById("chat-config").textContent);
const api = new SessionsApi(config.sessions_url, config.app_name);
const $ = (id) => document.getElementById(id);
const layout = $("chat-layout");
const conversation = $("conversation");
const messages = $("messages");
const input = $("composer-input");
const sendButton = $("send");
const stopButton = $("stop");
const jumpButton = $("jump-latest");
const stateView = $("state-view");
const contextView = $("context-view");
const pendingView = $("pending-view");
const tray = new AttachmentTray({
  tray: $("attachment-tray"),
  input: $("attach-input"),
  button: $("attach"),
  dropTargets: [$("composer"), conversation],
  pasteTarget: input,
  sessionsUrl: config.sessions_url,
  onChange: () => {
    input.required = tray.files.length === 0;
  },
});

let sessionId = null;
let title = "";
let socket = null;
let turn = null;
let creating = false;
let openCount = 0;
let temporary = false;
const NOTICE_SECONDS = 8;
const NOTICE_RECHECK_SECONDS = 2;
const MAX_NOTICES = 4;
const EVENT_ANCHOR = "#event-";

const urlFor = (id) =>
  config.session_url_template.replace(config.session_id_placeholder, encodeURIComponent(id));

function sessionIdFromPath(path) {
  const [prefix, suffix] = config.session_url_template.split(config.session_id_placeholder);
  if (path.startsWith(prefix) && path.endsWith(suffix) && path.length > prefix.length + suffix.length) {
    return decodeURIComponent(path.slice(prefix.length, path.length - suffix.length));
  }
  return null;
}

// Alerts, status, title ------------------------------------------------------------------

function showAlert(message, code = "") {
  $("chat-alert-text").textContent = message;
  $("chat-alert").dataset.code = code;
  $("chat-alert").hidden = false;
}

function hideAlert() {
  $("chat-alert").hidden = true;
}

function setConnection(state, detail) {
  const text = CONNECTION_TEXT[state];
  const connection = $("connection");
  connection.dataset.state = state;
  connection.title = typeof text === "function" ? text(detail) : text;
  // Only the dot while all is well (the words in its tooltip and for screen readers): the
  // words show when something is wrong, so they never take the title's room for nothing.
  $("connection-text").classList.toggle("visually-hidden", state === "open" || state === "connecting");
  $("connection-text").textContent = connection.title;
}

/** Mark the open chat (or the draft) as temporary: no memory read or written. */
function setTemporary(on) {
  temporary = on;
  $("temporary-banner").hidden = !on;
  $("temporary-chat").setAttribute("aria-pressed", String(on));
  layout.classList.toggle("is-temporary", on);
}

/** Take a notice off the stack, keeping the keyboard in the page if it was on it. */
function noticeRemove(item) {
  if (item.contains(document.activeElement)) {
    input.focus();
  }
  item.remove();
}

/** Let a notice go after a while, not while the pointer or the keyboard is on the stack. */
function noticeExpire(item, seconds) {
  setTimeout(() => {
    if (!item.isConnected) {
      return;
    }
    if ($("chat-notices").matches(":hover, :focus-within")) {
      noticeExpire(item, NOTICE_RECHECK_SECONDS);
    } else {
      noticeRemove(item);
    }
  }, seconds * 1000);
}

/**
 * A notice from the server (a memory saved or deleted, settings changed). Notices stack, the
 * newest last, each shown a while; "all your data was deleted" resets the page and is said
 * once, as an alert.
 */
function showNotice(notice) {
  if (!notice || typeof notice.message !== "string") {
    return;
  }
  if (notice.kind === "data_deleted") {
    showDraft({ push: sessionId !== null });
    sidebar.loadPage({ reset: true });
    showAlert(notice.message);
    return;
  }
  const list = $("chat-notices");
  const item = element("li", "chat-notice");
  item.dataset.kind = notice.kind ?? "";
  const dismiss = element("button", "icon-button notice-dismiss", "\u00d7");
  dismiss.type = "button";
  dismiss.setAttribute("aria-label", "Dismiss notice");
  dismiss.title = "Dismiss";
  dismiss.addEventListener("click", () => noticeRemove(item));
  item.append(element("span", "chat-notice-text", notice.message), dismiss);
  list.append(item);
  while (list.children.length > MAX_NOTICES) {
    noticeRemove(list.firstElementChild);
  }
  noticeExpire(item, NOTICE_SECONDS);
  refreshPending();
}

/** Scroll to the turn named by the address (#event-<id>, from the Memory page) and mark it. */
function revealAnchoredEvent() {
  if (!location.hash.startsWith(EVENT_ANCHOR)) {
    return;
  }
  const id = decodeURIComponent(location.hash.slice(EVENT_ANCHOR.length));
  const entry = entryById(id);
  if (!entry) {
    showAlert("That turn is no longer in this chat's history.");
    return;
  }
  messages.querySelector(".entry-anchored")?.classList.remove("entry-anchored");
  entry.classList.add("entry-anchored");
  entry.tabIndex = -1;
  entry.scrollIntoView({ block: "center" });
  entry.focus({ preventScroll: true });
}

function setTitle(newTitle) {
  title = newTitle;
  $("chat-title").textContent = title || (sessionId ? "Untitled chat" : "New chat");
  document.title = `${title ? `${title} · ` : ""}Chat · Agent memory`;
}

// Conversation ---------------------------------------------------------------------------

function updateEmpty() {
  $("empty-chat").hidden = messages.children.length > 0;
}

/**
 * The view follows the newest reply as it grows (markdown, code blocks, buttons added after a
 * frame included) unless the reader scrolled up on purpose; then "Jump to latest" shows and
 * takes them back down, and following resumes once they are at the bottom again.
 */
let followLatest = true;
let lastScrollTop = 0;

function distanceToBottom() {
  return conversation.scrollHeight - conversation.scrollTop - conversation.clientHeight;
}

function scrollToLatest() {
  followLatest = true;
  conversation.scrollTop = conversation.scrollHeight;
  lastScrollTop = conversation.scrollTop;
  jumpButton.hidden = true;
}

/** The reader leaves the newest reply: any scroll up is theirs (a reply growing never
 *  scrolls up), and a wheel or a key up says so before the scroll itself starts. */
function leaveLatest() {
  followLatest = false;
  jumpButton.hidden = distanceToBottom() < STICK_TO_BOTTOM_PX;
}

// A scroll up that still ends at the very bottom is the browser's, not the reader's: the view
// grew (the composer shrank back after a long message) and its end moved up with it.
conversation.addEventListener("scroll", () => {
  const distance = distanceToBottom();
  if (conversation.scrollTop < lastScrollTop && distance >= 1) {
    followLatest = false;
  } else if (distance < STICK_TO_BOTTOM_PX) {
    followLatest = true;
  }
  lastScrollTop = conversation.scrollTop;
  jumpButton.hidden = followLatest || distanceToBottom() < STICK_TO_BOTTOM_PX;
});
conversation.addEventListener(
  "wheel",
  (event) => {
    if (event.deltaY < 0) {
      leaveLatest();
    }
  },
  { passive: true },
);
conversation.addEventListener("touchmove", leaveLatest, { passive: true });
conversation.addEventListener("keydown", (event) => {
  if (["ArrowUp", "PageUp", "Home"].includes(event.key)) {
    leaveLatest();
  }
});
new ResizeObserver(() => {
  if (followLatest) {
    scrollToLatest();
  } else {
    jumpButton.hidden = distanceToBottom() < STICK_TO_BOTTOM_PX;
  }
}).observe(messages);
jumpButton.addEventListener("click", () => {
  scrollToLatest();
  input.focus({ preventScroll: true });
});

/** Run a DOM change, keeping the view at the bottom if the reader was following it. */
function keepingBottom(change) {
  change();
  updateEmpty();
  if (followLatest) {
    scrollToLatest();
  }
}

function entryById(id) {
  const quoted = CSS.escape(id);
  return messages.querySelector(
    `[data-event-id="${quoted}"], [data-response-event-id="${quoted}"]`,
  );
}

function pendingEntry(clientMessageId) {
  return messages.querySelector(`[data-client-message-id="${CSS.escape(clientMessageId)}"]`);
}

function placeEntry(existing, entry) {
  keepingBottom(() => {
    if (existing && entry) {
      existing.replaceWith(entry);
    } else if (existing) {
      existing.remove();
    } else if (entry) {
      messages.append(entry);
    }
  });
}

/** Retry only on the last entry of its turn: a turn run again shows its new reply after the
 *  ending it replaced (which may be sent again when the turn resumes). */
function staleRetriesRemove() {
  const last = new Map();
  for (const entry of messages.querySelectorAll("[data-invocation-id]")) {
    last.set(entry.dataset.invocationId, entry);
  }
  for (const button of messages.querySelectorAll(".retry-button")) {
    const entry = button.closest("[data-invocation-id]");
    if (last.get(entry.dataset.invocationId) !== entry) {
      button.remove();
    }
  }
}

/** An edit's or a regeneration's rewind: the turns it took out of the history leave the page
 *  (the new turn's own message, pending, stays). */
function rewoundRemove(invocationId, clientMessageId) {
  const first = messages.querySelector(`[data-invocation-id="${CSS.escape(invocationId)}"]`);
  keepingBottom(() => {
    for (let node = first; node; ) {
      const next = node.nextElementSibling;
      if (node.dataset.clientMessageId !== clientMessageId) {
        node.remove();
      }
      node = next;
    }
  });
}

/** Regenerate goes on the last reply only, and only while no turn runs. */
function rewriteControlsUpdate() {
  for (const button of messages.querySelectorAll(".regenerate-button")) {
    button.remove();
  }
  const last = messages.lastElementChild;
  if (turn || !last?.matches(".entry-agent[data-event-id], .entry-error[data-event-id]")) {
    return;
  }
  // A stopped or failed reply offers Retry, which runs the same turn again: one way suffices.
  if (
    last.classList.contains("streaming") ||
    last.querySelector(".retry-button") ||
    !userEntryOf(last)
  ) {
    return;
  }
  const bubble = last.querySelector(".bubble");
  let actions = bubble?.querySelector(":scope > .entry-actions");
  if (bubble && !actions) {
    actions = element("div", "entry-actions");
    bubble.append(actions);
  }
  actions?.append(actionButton("regenerate-button", "Regenerate", "Regenerate this reply"));
}

const COPIED_SECONDS = 2;

/** Copy a reply (its Markdown) or a code block to the clipboard, and say so on the button. */
async function copyText(button) {
  const entry = button.closest(".entry");
  const block = button.closest(".code-block");
  const text = block ? block.querySelector("pre").textContent : entry.dataset.text;
  let said = "Copied";
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    said = "Could not copy";
  }
  button.textContent = said;
  button.setAttribute("aria-label", said);
  setTimeout(() => {
    button.textContent = "Copy";
    button.setAttribute("aria-label", button.dataset.label);
  }, COPIED_SECONDS * 1000);
}

function userEntryOf(reply) {
  const invocationId = reply.dataset.invocationId;
  return invocationId
    ? messages.querySelector(`.entry-user[data-invocation-id="${CSS.escape(invocationId)}"]`)
    : null;
}

/** An event's entry, with the files a user message carries. */
function entryOf(event) {
  const item = eventEntry(event);
  const files = event.custom_metadata?.attachments;
  if (item && event.author === "user" && files?.length) {
    item.querySelector(".bubble-body").after(attachmentList(config.sessions_url, files));
  }
  return item;
}

function showEvent(event) {
  const clientMessageId = event.custom_metadata?.client_message_id;
  const existing =
    entryById(event.id) ?? (clientMessageId ? pendingEntry(clientMessageId) : null);
  if (event.custom_metadata?.rewrite && event.actions?.rewind_before_invocation_id) {
    rewoundRemove(event.actions.rewind_before_invocation_id, clientMessageId);
  } else if (existing?.dataset.responseEventId === event.id) {
    // Already shown, in the step of the call it answers.
  } else if (existing || !completeToolSteps(messages, event)) {
    placeEntry(existing, entryOf(event));
  }
  staleRetriesRemove();
  if (turn && clientMessageId === turn.clientMessageId && !turn.started) {
    // Stored, so accepted: a replayed turn (after a reconnect) has no turn_started.
    turn.started = true;
    setBusy(true);
  }
  if (event.custom_metadata?.context) {
    renderContext(contextView, event.custom_metadata.context);
  }
}

function showDelta(frame) {
  if (turn) {
    if (frame.seq <= turn.lastSeq) {
      return;
    }
    turn.lastSeq = frame.seq;
  }
  let entry = entryById(frame.message_id);
  if (entry && !entry.classList.contains("streaming")) {
    return;
  }
  keepingBottom(() => {
    if (!entry) {
      entry = streamingEntry(frame.message_id, frame.invocation_id);
      messages.append(entry);
      staleRetriesRemove();
    }
    appendDelta(entry, frame.text);
  });
}

/** Streamed replies that got no final event stay as they are, marked as cut short. */
function settleStreaming(interrupted) {
  for (const entry of messages.querySelectorAll(".streaming")) {
    entry.classList.remove("streaming");
    entry.removeAttribute("aria-busy");
    if (interrupted) {
      noteOn(entry, interruptedNote(null));
    }
  }
}

// Turns ----------------------------------------------------------------------------------

function setBusy(busy) {
  messages.classList.toggle("busy", busy);
  sendButton.hidden = busy;
  stopButton.hidden = !busy;
  stopButton.disabled = !(busy && turn?.started);
  if (!busy && document.activeElement === stopButton) {
    input.focus();
  }
}

function endTurn() {
  turn = null;
  settleStreaming(false);
  setBusy(false);
  rewriteControlsUpdate();
}

/** The title a chat takes from its first message. */
function titleFrom(text) {
  const words = text.split(/\s+/).join(" ").trim();
  return words.length > AUTO_TITLE_CHARS ? `${words.slice(0, AUTO_TITLE_CHARS - 1)}…` : words;
}

function autoTitle(text) {
  if (!title && sessionId && text.trim()) {
    sidebar.rename(sessionId, titleFrom(text));
  }
}

function turnComplete(frame) {
  settleStreaming(frame.interrupted);
  if (frame.context) {
    renderContext(contextView, frame.context);
  }
  pendingEntry(frame.client_message_id)?.classList.remove("pending");
  if (turn && frame.client_message_id === turn.clientMessageId) {
    const { text, retitle } = turn;
    endTurn();
    if (retitle) {
      // The first message was edited and the title had been made from it: it follows.
      sidebar.rename(sessionId, titleFrom(text));
    } else {
      autoTitle(text);
    }
  }
  sidebar.upsert({ id: sessionId, title, last_update_time: Date.now() / 1000 });
  refreshState();
}

function serverError(frame) {
  // The sentence is for the reader; the code stays in the frame (and the server's log).
  showAlert(frame.message, frame.code);
  if (frame.code === "session_not_found") {
    socket?.close();
    setConnection("idle");
    endTurn();
  } else if (turn && !turn.started) {
    // Refused before it started (too long, rate limited...): give the text back to edit.
    socket.forget(turn.clientMessageId);
    const entry = pendingEntry(turn.clientMessageId);
    if (entry) {
      keepingBottom(() => entry.remove());
    }
    const rewrite = turn.rewrite;
    if (!input.value && !rewrite) {
      input.value = turn.text;
      autosize();
    }
    endTurn();
    if (rewrite) {
      // The page took the replaced turns away; nothing was rewound, so show them again.
      openSession(sessionId).then(() => showAlert(frame.message, frame.code));
    }
  }
}

function onFrame(frame) {
  switch (frame.type) {
    case "turn_started":
      if (frame.resumed) {
        // Run on from its stored events: text streamed before and never stored is void.
        for (const entry of messages.querySelectorAll(".streaming")) {
          entry.remove();
        }
      }
      if (turn && frame.client_message_id === turn.clientMessageId) {
        turn.started = true;
        setBusy(true);
      }
      break;
    case "turn_running":
      // Written by another connection (this page before a reload, another tab): it streams
      // here from where it is, and Stop still stops it.
      if (turn && frame.client_message_id === turn.clientMessageId) {
        turn.started = true;
        setBusy(true);
      }
      break;
    case "event":
      showEvent(frame.event);
      break;
    case "delta":
      showDelta(frame);
      break;
    case "turn_complete":
      turnComplete(frame);
      break;
    case "error":
      serverError(frame);
      break;
    case "notice":
      showNotice(frame.notice);
      break;
    default:
      break;
  }
}

function connect(id) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const path = config.socket_path_template.replace(
    config.session_id_placeholder,
    encodeURIComponent(id),
  );
  const app = new URLSearchParams({ app_name: api.appName });
  socket = new ChatSocket(`${scheme}//${location.host}${path}?${app}`, {
    onFrame,
    onStatus: setConnection,
    checkFatal: async () => {
      try {
        await api.getSession(id);
        return null;
      } catch (error) {
        if (error.status === 404) {
          return "This chat no longer exists.";
        }
        if (error.status === 401 || error.status === 403) {
          return "You are signed out. Sign in again to continue.";
        }
        return null;
      }
    },
    onFatal: (message) => {
      showAlert(message);
      setConnection("idle");
      endTurn();
    },
  });
  socket.connect();
}

async function sendMessage() {
  const text = input.value;
  if ((!text.trim() && !tray.files.length) || turn || creating) {
    return;
  }
  hideAlert();
  if (!sessionId) {
    creating = true;
    try {
      const session = await api.createSession({ temporary });
      sidebar.upsert(session);
      await openSession(session.id, { push: true, fresh: true });
    } catch (error) {
      showAlert(`Could not start a chat: ${error.message}`);
      return;
    } finally {
      creating = false;
    }
  }
  let attachments = [];
  if (tray.files.length) {
    creating = true;
    try {
      attachments = await tray.upload(sessionId);
    } catch (error) {
      showAlert(`Your files were not sent: ${error.message}`);
      return;
    } finally {
      creating = false;
    }
    tray.clear();
  }
  const clientMessageId = newClientMessageId();
  const entry = userEntry(text, { pending: true });
  entry.dataset.clientMessageId = clientMessageId;
  placeEntry(null, entry);
  scrollToLatest();
  turn = { clientMessageId, text, started: false, lastSeq: -1 };
  setBusy(true);
  input.value = "";
  autosize();
  socket.sendMessage(clientMessageId, text, attachments);
}

/** Run an interrupted or failed turn again (the Retry button), or resume an open one. */
function retryTurn(clientMessageId) {
  if (turn || !socket) {
    return;
  }
  hideAlert();
  turn = { clientMessageId, text: "", started: false, lastSeq: -1 };
  setBusy(true);
  socket.retryTurn(clientMessageId);
}

/** After loading the history: a last turn with no ending (its server stopped mid-reply, or it
 *  runs in another tab) is asked for, and resumes or shows here once it ends. */
function openTurnResume(events) {
  const last = events.at(-1);
  if (!last || last.turn_complete) {
    return;
  }
  const opening = events.find(
    (event) => event.invocation_id === last.invocation_id && event.author === "user",
  );
  const clientMessageId = opening?.custom_metadata?.client_message_id;
  if (clientMessageId) {
    retryTurn(clientMessageId);
  }
}

/**
 * Edit a sent message or regenerate the last reply: the turns from the replaced one on leave
 * the page, the message shows pending, and the server rewinds the chat before that turn and
 * runs it (docs/websocket-protocol.md, "Edit and regenerate").
 */
function rewriteTurn(frame, replaced, text, { retitle = false } = {}) {
  if (turn || !socket) {
    return;
  }
  hideAlert();
  const clientMessageId = newClientMessageId();
  // The replaced message's files go again with the new turn: show them on it meanwhile.
  const files = replaced.querySelector(".bubble > .attachment-list");
  keepingBottom(() => {
    while (replaced.nextElementSibling) {
      replaced.nextElementSibling.remove();
    }
    replaced.remove();
  });
  const entry = userEntry(text, { pending: true });
  if (files) {
    files.hidden = false;
    entry.querySelector(".bubble-body").after(files);
  }
  entry.dataset.clientMessageId = clientMessageId;
  placeEntry(null, entry);
  scrollToLatest();
  turn = { clientMessageId, text, started: false, lastSeq: -1, rewrite: true, retitle };
  setBusy(true);
  input.focus();
  socket.rewriteTurn(clientMessageId, frame);
}

/** Put an edit form in place of a sent message's text; Enter sends, Escape cancels. */
function editStart(entry) {
  if (turn || entry.querySelector(".edit-form")) {
    return;
  }
  const body = entry.querySelector(".bubble-body");
  const actions = entry.querySelector(".entry-actions");
  const files = entry.querySelector(".bubble > .attachment-list");
  const original = body.textContent;
  const later = { replies: 0, messages: 0 };
  for (let next = entry.nextElementSibling; next; next = next.nextElementSibling) {
    if (next.matches(".entry-agent")) {
      later.replies += 1;
    } else if (next.matches(".entry-user")) {
      later.messages += 1;
    }
  }
  const form = editForm(original, files, editLossNote(later));
  // A title made from the first message follows its edit; one the person chose stays.
  const retitle =
    entry === messages.querySelector(".entry-user") && title === titleFrom(original);
  const area = form.querySelector("textarea");
  body.hidden = true;
  actions.hidden = true;
  if (files) {
    files.hidden = true;
  }
  body.after(form);
  const close = () => {
    form.remove();
    body.hidden = false;
    actions.hidden = false;
    if (files) {
      files.hidden = false;
    }
    actions.querySelector(".edit-button").focus();
  };
  form.querySelector(".edit-cancel").addEventListener("click", close);
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      close();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = area.value;
    if (text.trim() && !turn) {
      rewriteTurn({ type: "edit", message_id: entry.dataset.eventId, text }, entry, text, {
        retitle,
      });
    }
  });
  area.focus();
  area.setSelectionRange(area.value.length, area.value.length);
}

function regenerate(reply) {
  const asked = userEntryOf(reply);
  if (asked) {
    const text = asked.querySelector(".bubble-body").textContent;
    rewriteTurn({ type: "regenerate", message_id: reply.dataset.eventId }, asked, text);
  }
}

messages.addEventListener("click", (event) => {
  const button = event.target.closest(
    ".retry-button, .edit-button, .regenerate-button, .copy-button",
  );
  if (!button) {
    return;
  }
  if (button.classList.contains("copy-button")) {
    copyText(button);
  } else if (button.classList.contains("retry-button")) {
    retryTurn(button.dataset.retry);
  } else if (button.classList.contains("edit-button")) {
    editStart(button.closest(".entry"));
  } else {
    regenerate(button.closest(".entry"));
  }
});

// Opening chats --------------------------------------------------------------------------

function leaveCurrent() {
  openCount += 1;
  socket?.close();
  socket = null;
  turn = null;
  setBusy(false);
  hideAlert();
  setConnection("idle");
  messages.replaceChildren();
  renderEmpty(contextView, "No reply yet.");
  closeDrawers();
}

/** The panel's "Waiting to be remembered": the chat's messages not yet made memories. */
async function refreshPending() {
  const id = sessionId;
  if (!id) {
    renderEmpty(pendingView, "Open or start a chat.");
    return;
  }
  try {
    const pending = await api.getPendingMemory(id);
    if (id === sessionId) {
      renderPending(pendingView, pending);
    }
  } catch (error) {
    if (id === sessionId) {
      renderEmpty(pendingView, `Could not load what is pending: ${error.message}`);
    }
  }
}

// The state's raw JSON, instead of the values as a person reads them: the last state read is
// shown again the other way, and the choice holds for the states read after it.
const stateRawToggle = $("state-raw-toggle");
let stateShown = null;

function stateRaw() {
  return stateRawToggle.getAttribute("aria-pressed") === "true";
}

function showState(state) {
  stateShown = state;
  renderState(stateView, state, { raw: stateRaw() });
}

stateRawToggle.addEventListener("click", () => {
  stateRawToggle.setAttribute("aria-pressed", String(!stateRaw()));
  if (stateShown) {
    renderState(stateView, stateShown, { raw: stateRaw() });
  }
});

async function refreshState() {
  const id = sessionId;
  refreshPending();
  if (!id) {
    stateShown = null;
    renderEmpty(stateView, "Open or start a chat to see its state.");
    return;
  }
  try {
    const state = await api.getState(id);
    if (id === sessionId) {
      showState(state);
    }
  } catch (error) {
    if (id === sessionId) {
      stateShown = null;
      renderEmpty(stateView, `Could not load the state: ${error.message}`);
    }
  }
}

/** Open a chat: its history (unless `fresh`, just created), its state and its socket;
 *  `hash` (#event-<id>) is added to the address pushed, and the chat opens at that turn. */
async function openSession(id, { push = false, fresh = false, hash = "" } = {}) {
  leaveCurrent();
  let loaded = [];
  const opening = openCount;
  sessionId = id;
  setTitle(sidebar.titleOf(id) || (id === config.session_id ? config.title : ""));
  setTemporary(sidebar.isTemporary(id) || (id === config.session_id && config.temporary));
  if (push) {
    history.pushState({ sessionId: id }, "", urlFor(id) + hash);
  }
  sidebar.setActive(id);
  if (!fresh) {
    conversation.setAttribute("aria-busy", "true");
    let events;
    try {
      events = await api.listEvents(id);
    } catch (error) {
      if (opening === openCount) {
        conversation.removeAttribute("aria-busy");
        showAlert(
          error.status === 404
            ? "This chat does not exist or was deleted."
            : `Could not load the chat: ${error.message}`,
        );
      }
      return;
    }
    if (opening !== openCount) {
      return;
    }
    conversation.removeAttribute("aria-busy");
    loaded = events;
    keepingBottom(() => {
      for (const event of events) {
        const entry = completeToolSteps(messages, event) ? null : entryOf(event);
        if (entry) {
          messages.append(entry);
        }
      }
    });
    staleRetriesRemove();
    rewriteControlsUpdate();
    scrollToLatest();
    revealAnchoredEvent();
    const last = events.findLast((event) => event.custom_metadata?.context);
    if (last) {
      renderContext(contextView, last.custom_metadata.context);
    }
  }
  updateEmpty();
  refreshState();
  connect(id);
  if (!fresh) {
    openTurnResume(loaded);
  }
  input.focus();
}

function showDraft({ push = false, temporaryDraft = false } = {}) {
  leaveCurrent();
  sessionId = null;
  setTitle("");
  setTemporary(temporaryDraft);
  if (push) {
    history.pushState({ sessionId: null }, "", config.chat_url);
  }
  sidebar.setActive(null);
  updateEmpty();
  refreshState();
  input.focus();
}

// With more than one app open to the user, a picker chooses the app of the chats listed and of
// a new chat; choosing another starts a new chat in it, and the banner names its model (the
// offline model's banner when that answers).
const appPicker = $("app-picker");
if (appPicker) {
  appPicker.addEventListener("change", () => {
    api.appName = appPicker.value;
    const chosen = config.apps.find((app) => app.name === appPicker.value);
    if (chosen) {
      $("model-label").textContent = chosen.model;
      $("model-banner").hidden = chosen.offline;
      $("offline-banner").hidden = !chosen.offline;
    }
    showDraft({ push: true });
    sidebar.loadPage({ reset: true });
  });
}

const sidebar = new Sidebar({
  api,
  pageSize: config.sidebar_page_size,
  urlFor,
  onOpen: (id) => {
    if (id !== sessionId) {
      openSession(id, { push: true });
    } else {
      closeDrawers();
    }
  },
  onDeleted: (id) => {
    if (id === sessionId) {
      showDraft({ push: true });
    }
  },
  onRenamed: (id, newTitle) => {
    if (id === sessionId) {
      setTitle(newTitle);
    }
  },
  onError: showAlert,
});

const eventHash = (eventId) => (eventId ? `${EVENT_ANCHOR}${encodeURIComponent(eventId)}` : "");

new ChatSearch({
  search: (query) => api.searchChats(config.search_url, query),
  urlFor: (id, eventId) => urlFor(id) + eventHash(eventId),
  onOpen: (id, eventId) => {
    if (id !== sessionId) {
      openSession(id, { push: true, hash: eventHash(eventId) });
      return;
    }
    closeDrawers();
    if (eventId) {
      history.pushState({ sessionId: id }, "", urlFor(id) + eventHash(eventId));
      revealAnchoredEvent();
    }
  },
});

// Drawers: on narrow screens the session list and the side panel slide over the chat ------

function setOpen(toggle, className, open) {
  layout.classList.toggle(className, open);
  $(toggle).setAttribute("aria-expanded", String(open));
  $("drawer-backdrop").hidden = !(
    NARROW.matches &&
    (layout.classList.contains("sidebar-open") || layout.classList.contains("panel-open"))
  );
}

function closeDrawers() {
  if (NARROW.matches) {
    setOpen("toggle-sidebar", "sidebar-open", false);
    setOpen("toggle-panel", "panel-open", false);
  }
}

function toggleDrawer(toggle, className, drawer) {
  const open = !layout.classList.contains(className);
  if (NARROW.matches) {
    closeDrawers();
  }
  setOpen(toggle, className, open);
  if (open && NARROW.matches) {
    $(drawer).querySelector("a, button, input, [tabindex]")?.focus();
  }
}

$("toggle-sidebar").addEventListener("click", () =>
  toggleDrawer("toggle-sidebar", "sidebar-open", "chat-sidebar"),
);
$("toggle-panel").addEventListener("click", () =>
  toggleDrawer("toggle-panel", "panel-open", "chat-panel"),
);
$("drawer-backdrop").addEventListener("click", closeDrawers);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && NARROW.matches && !$("drawer-backdrop").hidden) {
    const toggle = layout.classList.contains("sidebar-open") ? "toggle-sidebar" : "toggle-panel";
    closeDrawers();
    $(toggle).focus();
  }
});
function fitLayout() {
  setOpen("toggle-sidebar", "sidebar-open", false);
  setOpen("toggle-panel", "panel-open", !NARROW.matches);
}
NARROW.addEventListener("change", fitLayout);

// Composer -------------------------------------------------------------------------------

function autosize() {
  input.style.height = "auto";
  input.style.height = `${input.scrollHeight + 2}px`;
}

input.addEventListener("input", autosize);
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    sendMessage();
  }
});
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  sendMessage();
});
stopButton.addEventListener("click", () => {
  socket?.cancel();
  stopButton.disabled = true;
  input.focus();
});
$("chat-alert-close").addEventListener("click", () => {
  hideAlert();
  input.focus();
});
$("new-chat").addEventListener("click", (event) => {
  event.preventDefault();
  showDraft({ push: sessionId !== null });
});
$("temporary-chat").addEventListener("click", () => {
  if (sessionId === null) {
    setTemporary(!temporary);
    input.focus();
  } else {
    showDraft({ push: true, temporaryDraft: !temporary });
  }
});
window.addEventListener("popstate", () => {
  const id = sessionIdFromPath(location.pathname);
  if (id) {
    openSession(id);
  } else {
    showDraft();
  }
});

fitLayout();
sidebar.loadPage({ reset: true });
if (config.session_id) {
  openSession(config.session_id);
} else {
  showDraft({ temporaryDraft: config.start_temporary });
}
