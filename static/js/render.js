// DOM for the conversation, the state panel and the context panel. Text from users and models
// only ever goes in through textContent; the one exception is an event's `html`, which the
// server rendered from Markdown through an allow-list (sessions_app.markdown).

import hljs from "../vendor/highlight/highlight.min.js";

/** Create an element with a class and, optionally, its text. */
export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function parts(event) {
  return event.content?.parts ?? [];
}

/** The visible text of an event: its text parts, without a model's thoughts. */
export function eventText(event) {
  return parts(event)
    .filter((part) => typeof part.text === "string" && !part.thought)
    .map((part) => part.text)
    .join("");
}

function entry(kind, id, invocationId) {
  const item = element("li", `entry entry-${kind}`);
  if (id) {
    item.dataset.eventId = id;
  }
  if (invocationId) {
    item.dataset.invocationId = invocationId;
  }
  return item;
}

function bubble(item, author, { hiddenAuthor = false } = {}) {
  const box = element("div", "bubble");
  box.append(element("p", hiddenAuthor ? "bubble-author visually-hidden" : "bubble-author", author));
  const body = element("div", "bubble-body");
  box.append(body);
  item.append(box);
  return body;
}

/** A small labelled button under a message (Edit, Regenerate, Copy). */
export function actionButton(className, text, label) {
  const button = element("button", `button button-quiet entry-action ${className}`, text);
  button.type = "button";
  button.setAttribute("aria-label", label);
  return button;
}

/** A user's message; `pending` while the server has not stored it yet. A stored one can be
 *  edited (the Edit button). */
export function userEntry(text, { id, invocationId, pending = false } = {}) {
  const item = entry("user", id, invocationId);
  bubble(item, "You", { hiddenAuthor: true }).textContent = text;
  if (pending) {
    item.classList.add("pending");
  }
  if (id) {
    const actions = element("div", "entry-actions");
    actions.append(actionButton("edit-button", "Edit", "Edit this message"));
    item.querySelector(".bubble").append(actions);
  }
  return item;
}

/** A Copy button: copies `text`, or the text of `source` (an element) when clicked. */
export function copyButton(label) {
  const button = actionButton("copy-button", "Copy", label);
  button.dataset.label = label;
  return button;
}

/**
 * A reply's rendered Markdown, finished in the page: code blocks highlighted (highlight.js;
 * it escapes what it wraps, so the server's allow-listed HTML stays safe) and each given a
 * Copy button.
 */
export function codeBlocksFinish(body) {
  for (const pre of body.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (code) {
      hljs.highlightElement(code);
    }
    const block = element("div", "code-block");
    pre.replaceWith(block);
    block.append(pre, copyButton("Copy code"));
  }
}

/** The form that replaces a message's text while it is edited; `files`, the message's list of
 *  attached files (or null), shows in it as what goes again with the edited text. */
/**
 * What sending an edit takes away, said before it is sent: the replies after the message
 * (its own included) are replaced, and later messages of the person go. "" when nothing
 * follows it.
 */
export function editLossNote({ replies, messages }) {
  if (!replies && !messages) {
    return "";
  }
  const repliesSaid =
    replies === 1
      ? "The reply after it will be replaced"
      : `The ${replies} replies after it will be replaced`;
  if (!messages) {
    return `${repliesSaid}.`;
  }
  const messagesSaid = messages === 1 ? "your later message" : `your ${messages} later messages`;
  return `${repliesSaid}, and ${messagesSaid} removed.`;
}

/**
 * The form that edits a sent message: its text, the files sent again with it, and `loss`,
 * what sending takes away (editLossNote), read out with the text box.
 */
export function editForm(text, files, loss = "") {
  const form = element("form", "edit-form");
  const label = element("label", "visually-hidden", "Edit your message");
  const area = element("textarea", "edit-input");
  area.id = `edit-input-${Math.random().toString(36).slice(2)}`;
  label.htmlFor = area.id;
  area.value = text;
  area.rows = Math.min(8, text.split("\n").length + 1);
  const buttons = element("div", "edit-actions");
  const save = element("button", "button", "Send");
  save.type = "submit";
  save.setAttribute("aria-label", "Send the edited message");
  const cancel = element("button", "button button-quiet edit-cancel", "Cancel");
  cancel.type = "button";
  buttons.append(save, cancel);
  form.append(label, area);
  const described = [];
  if (files) {
    const kept = files.cloneNode(true);
    kept.setAttribute("aria-label", "Files sent again with the edited message");
    const note = element("p", "edit-files-note", "Sent again with the edited message:");
    note.id = `${area.id}-files`;
    described.push(note.id);
    form.append(note, kept);
  }
  if (loss) {
    const note = element("p", "edit-loss-note", loss);
    note.id = `${area.id}-loss`;
    described.push(note.id);
    form.append(note);
  }
  if (described.length) {
    area.setAttribute("aria-describedby", described.join(" "));
  }
  form.append(buttons);
  return form;
}

/** A reply being streamed: text is appended to it by appendDelta until the final event. */
export function streamingEntry(messageId, invocationId) {
  const item = entry("agent", messageId, invocationId);
  item.classList.add("streaming");
  item.setAttribute("aria-busy", "true");
  bubble(item, "Assistant");
  return item;
}

export function appendDelta(item, text) {
  item.querySelector(".bubble-body").append(document.createTextNode(text));
}

/** Mark an entry with a short note under it ("Stopped", "Not sent: …"). */
export function noteOn(item, text) {
  const box = item.querySelector(".bubble") ?? item;
  box.querySelector(".entry-note")?.remove();
  box.append(element("p", "entry-note", text));
}

function pretty(value) {
  return JSON.stringify(value ?? {}, null, 2);
}

function failed(response) {
  return Boolean(response && (response.status === "error" || "error" in response));
}

/** A tool call as one compact step: a readable summary, the JSON on demand (issue 17). */
function toolStep(call, summary) {
  const step = element("details", "tool-step running");
  step.dataset.callId = call.id ?? "";
  step.dataset.toolName = call.name ?? "";
  const line = element("summary", "tool-summary");
  line.append(element("span", "tool-icon"), element("span", "tool-text", `${summary}…`));
  const body = element("dl", "tool-details");
  body.append(element("dt", "", "Tool"), element("dd", "", call.name ?? "?"));
  const args = element("dd");
  args.append(element("pre", "tool-json", pretty(call.args)));
  body.append(element("dt", "", "Called with"), args);
  step.append(line, body);
  return step;
}

/** Mark a step done with its tool's response (and the summary the server gave it). */
function stepDone(step, response, summary) {
  step.classList.remove("running");
  step.classList.toggle("failed", failed(response.response));
  const name = response.name ?? step.dataset.toolName ?? "?";
  step.querySelector(".tool-text").textContent =
    summary ?? (failed(response.response) ? `${name} failed` : `Used ${name}`);
  const result = element("dd");
  result.append(element("pre", "tool-json", pretty(response.response)));
  step.querySelector(".tool-details").append(element("dt", "", "Answer"), result);
}

function stepsOf(event) {
  return event.custom_metadata?.tool_steps ?? {};
}

/**
 * Put a tool response event into the steps of its calls already on the page; true if it
 * needs no entry of its own (every response found its call, and it has nothing else).
 */
export function completeToolSteps(container, event) {
  const responses = parts(event).filter((part) => part.function_response);
  if (!responses.length || eventText(event) || event.error_code) {
    return false;
  }
  const steps = responses.map(({ function_response: response }) =>
    response.id
      ? container.querySelector(`.tool-step.running[data-call-id="${CSS.escape(response.id)}"]`)
      : null,
  );
  if (steps.some((step) => !step)) {
    return false;
  }
  responses.forEach(({ function_response: response }, index) => {
    stepDone(steps[index], response, stepsOf(event)[response.id]);
    steps[index].closest(".entry").dataset.responseEventId = event.id;
  });
  return true;
}

const INTERRUPTED = "The reply was interrupted.";
export const SERVER_STOPPED = "server_stopped";

/** What an interrupted reply says: by whom, when the server stopped it. */
export function interruptedNote(event) {
  return event?.error_code === SERVER_STOPPED
    ? `${INTERRUPTED} The server stopped before it was finished.`
    : INTERRUPTED;
}

// A turn's events are msg-<client_message_id>, then msg-<client_message_id>.1, .2, ...
const TURN_EVENT_ID = /^msg-([A-Za-z0-9_-]{1,64})\.\d+$/;

/** The client_message_id whose turn an interrupted or failed final reply ended, or null. */
export function retryableClientMessageId(event) {
  if (!(event.interrupted || event.error_code)) {
    return null;
  }
  return TURN_EVENT_ID.exec(event.id ?? "")?.[1] ?? null;
}

/** The entry showing a stored event, or null for events that are not part of the dialogue. */
export function eventEntry(event) {
  if (event.actions?.compaction) {
    return null;
  }
  if (event.actions?.rewind_before_invocation_id) {
    if (event.custom_metadata?.rewrite) {
      // An edit or a regeneration: the new turn shows in place of the one it replaced.
      return null;
    }
    const item = entry("system", event.id);
    item.append(element("p", "system-line", "The conversation was rewound here."));
    return item;
  }
  const text = eventText(event);
  if (event.author === "user" && (text || event.custom_metadata?.attachments?.length)) {
    return userEntry(text, { id: event.id, invocationId: event.invocation_id });
  }
  const calls = parts(event).filter((part) => part.function_call);
  const responses = parts(event).filter((part) => part.function_response);
  if (!text && !calls.length && !responses.length && !event.error_code && !event.interrupted) {
    return null;
  }
  const failed = event.error_code && !event.interrupted;
  const kind = failed ? "error" : text || event.interrupted ? "agent" : "tool";
  const item = entry(kind, event.id, event.invocation_id);
  if (text || event.error_code || event.interrupted) {
    const body = bubble(item, "Assistant");
    if (typeof event.html === "string" && !event.error_code) {
      body.innerHTML = event.html;
      body.classList.add("rich");
      codeBlocksFinish(body);
    } else {
      body.textContent = text;
    }
    if (event.interrupted) {
      noteOn(item, interruptedNote(event));
    } else if (event.error_code) {
      noteOn(item, event.error_message || "The assistant could not answer.");
      item.dataset.errorCode = event.error_code;
    }
    if (text && !failed) {
      item.dataset.text = text;
      const actions = element("div", "entry-actions");
      actions.append(copyButton("Copy this reply"));
      item.querySelector(".bubble").append(actions);
    }
    const retryId = event.turn_complete ? retryableClientMessageId(event) : null;
    if (retryId) {
      const retry = element("button", "button button-quiet retry-button", "Retry");
      retry.type = "button";
      retry.dataset.retry = retryId;
      item.querySelector(".bubble").append(retry);
    }
  }
  const steps = stepsOf(event);
  for (const { function_call: call } of calls) {
    item.append(toolStep(call, steps[call.id] ?? `Using ${call.name}`));
  }
  for (const { function_response: response } of responses) {
    const step = toolStep({ id: response.id, name: response.name }, "");
    step.querySelector(".tool-details").replaceChildren(
      element("dt", "", "Tool"),
      element("dd", "", response.name ?? "?"),
    );
    stepDone(step, response, steps[response.id]);
    item.append(step);
  }
  return item;
}

// A list of records reads as a table up to this many columns; wider, each is a table of its own.
const TABLE_MAX_COLUMNS = 5;
// Deeper than this, a value is shown as its JSON.
const READABLE_MAX_DEPTH = 3;

function isPlain(value) {
  return value === null || typeof value !== "object";
}

function plainText(value) {
  if (value === null) {
    return "(empty)";
  }
  if (typeof value === "boolean") {
    return value ? "yes" : "no";
  }
  return String(value);
}

function byKey([one], [other]) {
  return one < other ? -1 : one > other ? 1 : 0;
}

/** The columns of a list of records of plain values (by name), or null if it is not one. */
function recordColumns(items) {
  const records = items.every(
    (item) =>
      item !== null &&
      typeof item === "object" &&
      !Array.isArray(item) &&
      Object.values(item).every(isPlain),
  );
  if (!records) {
    return null;
  }
  const columns = [...new Set(items.flatMap((item) => Object.keys(item)))].sort();
  return columns.length && columns.length <= TABLE_MAX_COLUMNS ? columns : null;
}

function recordsTable(items, columns) {
  const table = element("table", "state-table");
  const head = element("tr");
  for (const column of columns) {
    const cell = element("th", "", column);
    cell.scope = "col";
    head.append(cell);
  }
  const body = element("tbody");
  for (const item of items) {
    const row = element("tr");
    for (const column of columns) {
      row.append(element("td", "", column in item ? plainText(item[column]) : ""));
    }
    body.append(row);
  }
  const header = element("thead");
  header.append(head);
  table.append(header, body);
  return table;
}

/**
 * A state value as a person reads it: plain values as words (yes, no, (empty)), a list as a
 * list, a list of records as a table with a column per field, an object as a table of its
 * keys, by name; what they hold is shown the same way, to a few levels, then as JSON.
 */
function readableValue(value, depth = 0) {
  if (isPlain(value)) {
    return document.createTextNode(plainText(value));
  }
  if (depth >= READABLE_MAX_DEPTH) {
    return element("code", "", JSON.stringify(value));
  }
  // Keys in order of their names: the database keeps no order of its own (PostgreSQL's jsonb).
  const entries = Array.isArray(value) ? value : Object.entries(value).sort(byKey);
  if (!entries.length) {
    return document.createTextNode("(none)");
  }
  if (Array.isArray(value)) {
    const columns = recordColumns(value);
    if (columns) {
      return recordsTable(value, columns);
    }
    const list = element("ul", "state-value-list");
    for (const item of value) {
      const entry = element("li");
      entry.append(readableValue(item, depth + 1));
      list.append(entry);
    }
    return list;
  }
  const table = element("table", "state-table");
  const body = element("tbody");
  for (const [key, item] of entries) {
    const row = element("tr");
    const name = element("th", "", key);
    name.scope = "row";
    const cell = element("td");
    cell.append(readableValue(item, depth + 1));
    row.append(name, cell);
    body.append(row);
  }
  table.append(body);
  return table;
}

/** A state value as a person reads it, or as its raw JSON. */
function stateValue(value, raw) {
  const detail = element("dd");
  if (raw) {
    const json = element("pre", "state-raw");
    json.append(element("code", "", JSON.stringify(value, null, 2)));
    detail.append(json);
  } else {
    detail.append(readableValue(value));
  }
  return detail;
}

const STATE_SCOPES = [
  ["session", "Session", "this chat only"],
  ["user", "User", "user: keys, shared by all your chats"],
  ["app", "App", "app: keys, shared by everyone using the app"],
];

/**
 * Show a session's state ({session, user, app} of the REST API) grouped by scope, each value
 * as a person reads it, or as its JSON when `raw`.
 */
export function renderState(container, state, { raw = false } = {}) {
  container.replaceChildren();
  for (const [scope, title, description] of STATE_SCOPES) {
    const group = element("section", "state-group");
    group.dataset.scope = scope;
    const heading = element("h3", "state-scope", title);
    heading.append(element("span", "state-scope-note", ` · ${description}`));
    group.append(heading);
    const keys = Object.keys(state[scope] ?? {}).sort();
    if (keys.length) {
      const list = element("dl", "state-list");
      for (const key of keys) {
        const row = element("div", "state-row");
        row.append(element("dt", "", key), stateValue(state[scope][key], raw));
        list.append(row);
      }
      group.append(list);
    } else {
      group.append(element("p", "panel-empty", "No keys."));
    }
    container.append(group);
  }
}

function fact(list, term, value) {
  const row = element("div", "context-row");
  row.append(element("dt", "", term));
  const detail = element("dd");
  detail.append(value);
  row.append(detail);
  list.append(row);
}

/** Show what the model got for a reply (turn_complete.context or custom_metadata.context). */
export function renderContext(container, context) {
  container.replaceChildren();
  const list = element("dl", "context-list");
  const model = String(context.model);
  fact(list, "Model", context.offline ? `${model} (built in, no network)` : model);
  fact(list, "Events in context", String(context.event_count ?? 0));
  fact(list, "Memory", context.memory_enabled ? "used for this reply" : "not used for this reply");
  if (context.tools_refused) {
    fact(
      list,
      "Tools",
      "Off: this model's server cannot call tools, so memory tools are off. " +
        "Memories are still made from the chat in the background.",
    );
  }
  const memories = context.memories ?? [];
  if (memories.length) {
    const items = element("ul", "context-memories");
    for (const memory of memories) {
      const confidence = Number(memory.confidence ?? 1).toFixed(2);
      items.append(element("li", "", `${memory.text} (confidence ${confidence})`));
    }
    fact(list, `Memories used (${memories.length})`, items);
  } else {
    fact(list, "Memories used", "None");
  }
  fact(
    list,
    "Compaction summary",
    context.compaction_summary
      ? element("blockquote", "context-summary", context.compaction_summary)
      : "None: the history fit without one",
  );
  container.append(list);
}

/** Where the memory job of the pending messages stands, in words: a job waiting for its
 *  model server says why and when it is tried again, one that gave up says so. */
function pendingWhen(pending) {
  if (pending.job === "waiting") {
    const next = pending.next_attempt_at
      ? `, next try at ${new Date(pending.next_attempt_at).toLocaleTimeString()}`
      : "";
    return `memory job waiting to retry${next}: ${pending.job_error}`;
  }
  if (pending.job === "failed" || pending.job === "dead") {
    return `the memory job gave up: ${pending.job_error}`;
  }
  if (pending.job) {
    return `memory job ${pending.job}`;
  }
  return "when you leave this chat, or after a few more messages";
}

/** What of the chat waits to be remembered, from `/api/memory-pending/<id>/`. */
export function renderPending(container, pending) {
  container.replaceChildren();
  if (!pending.create) {
    const why = pending.temporary ? "this is a temporary chat" : "creating memories is off";
    container.append(element("p", "panel-empty", `Nothing from this chat is remembered: ${why}.`));
    return;
  }
  if (!pending.unprocessed_turns) {
    container.append(element("p", "panel-empty", "Nothing waiting: everything said here was considered."));
    return;
  }
  const count = pending.unprocessed_turns;
  container.append(
    element("p", "pending-note", `${count} message${count === 1 ? "" : "s"} pending (${pendingWhen(pending)}):`),
  );
  const items = element("ul", "pending-turns");
  for (const text of pending.turns) {
    items.append(element("li", "", text));
  }
  container.append(items);
}

/** A placeholder paragraph for an empty panel. */
export function renderEmpty(container, text) {
  container.replaceChildren(element("p", "panel-empty", text));
}
