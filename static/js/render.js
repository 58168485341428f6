// DOM for the conversation, the state panel and the context panel. Text from users and models
// only ever goes in through textContent; the one exception is an event's `html`, which the
// server rendered from Markdown through an allow-list (sessions_app.markdown).

const ARGS_PREVIEW_CHARS = 160;

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

function preview(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value ?? {});
  return text.length > ARGS_PREVIEW_CHARS ? `${text.slice(0, ARGS_PREVIEW_CHARS)}…` : text;
}

function entry(kind, id) {
  const item = element("li", `entry entry-${kind}`);
  if (id) {
    item.dataset.eventId = id;
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

/** A user's message; `pending` while the server has not stored it yet. */
export function userEntry(text, { id, pending = false } = {}) {
  const item = entry("user", id);
  bubble(item, "You", { hiddenAuthor: true }).textContent = text;
  if (pending) {
    item.classList.add("pending");
  }
  return item;
}

/** A reply being streamed: text is appended to it by appendDelta until the final event. */
export function streamingEntry(messageId) {
  const item = entry("agent", messageId);
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

function toolLine(item, label, detail) {
  const line = element("p", "tool-line");
  line.append(element("span", "tool-label", label), element("code", "tool-detail", detail));
  item.append(line);
}

/** The entry showing a stored event, or null for events that are not part of the dialogue. */
export function eventEntry(event) {
  if (event.actions?.compaction) {
    return null;
  }
  if (event.actions?.rewind_before_invocation_id) {
    const item = entry("system", event.id);
    item.append(element("p", "system-line", "The conversation was rewound here."));
    return item;
  }
  const text = eventText(event);
  if (event.author === "user" && text) {
    return userEntry(text, { id: event.id });
  }
  const calls = parts(event).filter((part) => part.function_call);
  const responses = parts(event).filter((part) => part.function_response);
  if (!text && !calls.length && !responses.length && !event.error_code && !event.interrupted) {
    return null;
  }
  const kind = event.error_code ? "error" : text ? "agent" : "tool";
  const item = entry(kind, event.id);
  if (text || event.error_code || event.interrupted) {
    const body = bubble(item, "Assistant");
    if (typeof event.html === "string" && !event.error_code) {
      body.innerHTML = event.html;
      body.classList.add("rich");
    } else {
      body.textContent = text;
    }
    if (event.error_code) {
      noteOn(item, `Error (${event.error_code}): ${event.error_message ?? "the model failed."}`);
    } else if (event.interrupted) {
      noteOn(item, "Stopped before the reply was finished.");
    }
  }
  for (const { function_call: call } of calls) {
    toolLine(item, `Tool call: ${call.name}`, preview(call.args));
  }
  for (const { function_response: response } of responses) {
    toolLine(item, `${response.name} returned`, preview(response.response));
  }
  return item;
}

function valueText(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

const STATE_SCOPES = [
  ["session", "Session", "this chat only"],
  ["user", "User", "user: keys, shared by all your chats"],
  ["app", "App", "app: keys, shared by everyone using the app"],
];

/** Show a session's state ({session, user, app} of the REST API) grouped by scope. */
export function renderState(container, state) {
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
        row.append(element("dt", "", key), element("dd", "", valueText(state[scope][key])));
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

/** A placeholder paragraph for an empty panel. */
export function renderEmpty(container, text) {
  container.replaceChildren(element("p", "panel-empty", text));
}
