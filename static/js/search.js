// Search across the user's chats from the sidebar (GET /api/search/): while a query is typed
// the chat list gives way to the chats and messages found; picking one opens the chat at it.

import { element } from "./render.js";

const DEBOUNCE_MS = 250;
const UNTITLED = "Untitled chat";

/** A span of ``text`` with the words at ``marks`` ([start, end) ranges) highlighted. */
function marked(className, text, marks = []) {
  const span = element("span", className);
  let at = 0;
  for (const [start, end] of marks) {
    span.append(text.slice(at, start), element("mark", "", text.slice(start, end)));
    at = end;
  }
  span.append(text.slice(at));
  return span;
}

/**
 * Callbacks: search(query) resolves to {results}; urlFor(sessionId, eventId) is a hit's
 * address; onOpen(sessionId, eventId) opens it (eventId null for a title match).
 */
export class ChatSearch {
  constructor({ search, urlFor, onOpen }) {
    this.search = search;
    this.urlFor = urlFor;
    this.onOpen = onOpen;
    this.input = document.getElementById("chat-search-input");
    this.results = document.getElementById("search-results");
    this.status = document.getElementById("search-status");
    this.hidden = [
      document.getElementById("session-list"),
      document.getElementById("session-list-status"),
      document.getElementById("load-more"),
    ];
    this.timer = null;
    this.asked = 0;
    this.input.addEventListener("input", () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.run(), DEBOUNCE_MS);
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.input.value) {
        event.preventDefault();
        event.stopPropagation();
        this.clear();
      } else if (event.key === "ArrowDown") {
        event.preventDefault();
        this.results.querySelector("a")?.focus();
      }
    });
    document.getElementById("chat-search").addEventListener("submit", (event) => {
      event.preventDefault();
      clearTimeout(this.timer);
      this.run();
    });
  }

  clear() {
    this.input.value = "";
    this.show(false);
  }

  show(searching) {
    this.results.hidden = !searching;
    for (const node of this.hidden) {
      node.classList.toggle("searching-hidden", searching);
    }
    if (!searching) {
      this.results.replaceChildren();
      this.status.textContent = "";
    }
  }

  async run() {
    const query = this.input.value.trim();
    const asked = ++this.asked;
    if (!query) {
      this.show(false);
      return;
    }
    this.show(true);
    this.status.textContent = "Searching…";
    let found;
    try {
      found = await this.search(query);
    } catch (error) {
      if (asked === this.asked) {
        this.results.replaceChildren();
        this.status.textContent = `Could not search: ${error.message}`;
      }
      return;
    }
    if (asked !== this.asked) {
      return;
    }
    this.results.replaceChildren(...found.results.map((hit) => this.hitItem(hit)));
    const count = found.results.length;
    this.status.textContent = count
      ? `${count} result${count === 1 ? "" : "s"}`
      : "No chat or message matches.";
  }

  hitItem(hit) {
    const item = element("li", "search-hit");
    const link = element("a", "search-link");
    link.href = this.urlFor(hit.session_id, hit.event_id);
    link.dataset.sessionId = hit.session_id;
    link.append(marked("session-name", hit.title || UNTITLED, hit.title ? hit.title_marks : []));
    if (hit.event_id) {
      const who = hit.author === "user" ? "You" : "Assistant";
      const snippet = marked("search-snippet", hit.snippet, hit.snippet_marks);
      snippet.prepend(`${who}: `);
      link.append(snippet);
    } else {
      link.append(element("span", "search-snippet", "Title matches"));
    }
    link.addEventListener("click", (event) => {
      if (event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey) {
        event.preventDefault();
        this.onOpen(hit.session_id, hit.event_id);
      }
    });
    link.addEventListener("keydown", (event) => {
      const sibling =
        event.key === "ArrowDown"
          ? item.nextElementSibling
          : event.key === "ArrowUp"
            ? item.previousElementSibling
            : undefined;
      if (sibling !== undefined) {
        event.preventDefault();
        (sibling?.querySelector("a") ?? (event.key === "ArrowUp" ? this.input : null))?.focus();
      }
    });
    item.append(link);
    return item;
  }
}
