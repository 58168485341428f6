// The list of the user's chats: newest first, a page at a time, with rename and delete.

import { element } from "./render.js";

const UNTITLED = "Untitled chat";
const sameDay = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
const otherDay = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });

function when(seconds) {
  const date = new Date(seconds * 1000);
  const today = new Date().toDateString() === date.toDateString();
  return (today ? sameDay : otherDay).format(date);
}

function iconButton(label, className, text) {
  const button = element("button", `icon-button ${className}`, text);
  button.type = "button";
  button.setAttribute("aria-label", label);
  button.title = label;
  return button;
}

/**
 * Callbacks: onOpen(sessionId) when a chat is picked, onDeleted(sessionId) after one is
 * deleted, onRenamed(sessionId, title), onError(message) when a call fails.
 */
export class Sidebar {
  constructor({ api, pageSize, urlFor, onOpen, onDeleted, onRenamed, onError }) {
    this.api = api;
    this.pageSize = pageSize;
    this.urlFor = urlFor;
    this.onOpen = onOpen;
    this.onDeleted = onDeleted;
    this.onRenamed = onRenamed;
    this.onError = onError;
    this.list = document.getElementById("session-list");
    this.moreButton = document.getElementById("load-more");
    this.status = document.getElementById("session-list-status");
    this.dialog = document.getElementById("delete-dialog");
    this.nextPageToken = null;
    this.activeId = null;
    this.moreButton.addEventListener("click", () => this.loadPage());
  }

  /** Load the first page (reset) or the next one. */
  async loadPage({ reset = false } = {}) {
    if (reset) {
      this.nextPageToken = null;
    }
    this.moreButton.disabled = true;
    this.status.textContent = "Loading chats…";
    try {
      const page = await this.api.listSessions({
        pageSize: this.pageSize,
        pageToken: this.nextPageToken,
      });
      if (reset) {
        this.list.replaceChildren();
      }
      for (const session of page.results) {
        // A temporary chat once left is reachable by its link only, while it is kept.
        if (session.temporary && session.id !== this.activeId) {
          continue;
        }
        this.upsert(session, { atTop: false });
      }
      this.nextPageToken = page.next_page_token;
      this.status.textContent = this.list.children.length ? "" : "No chats yet.";
    } catch (error) {
      this.status.textContent = "";
      this.onError(`Could not load your chats: ${error.message}`);
    } finally {
      this.moreButton.disabled = false;
      this.moreButton.hidden = !this.nextPageToken;
    }
  }

  item(sessionId) {
    return Array.from(this.list.children).find((li) => li.dataset.sessionId === sessionId) ?? null;
  }

  titleOf(sessionId) {
    return this.item(sessionId)?.dataset.title ?? "";
  }

  isTemporary(sessionId) {
    return this.item(sessionId)?.dataset.temporary === "true";
  }

  /** Add a session ({id, title, last_update_time}) or refresh its row, on top unless `atTop`
   * is false (then a new row goes last). A row being renamed is moved, never rebuilt. */
  upsert(session, { atTop = true } = {}) {
    let row = this.item(session.id);
    const title = session.title ?? row?.dataset.title ?? "";
    const temporary = session.temporary ?? row?.dataset.temporary === "true";
    if (!row || (title !== row.dataset.title && !row.classList.contains("renaming"))) {
      const fresh = this.row(session.id, title, temporary);
      row?.replaceWith(fresh);
      row = fresh;
    }
    row.querySelector(".session-time").textContent = when(session.last_update_time);
    if (atTop && this.list.firstElementChild !== row) {
      this.list.prepend(row);
    } else if (!row.isConnected) {
      this.list.append(row);
    }
    this.status.textContent = "";
    this.setActive(this.activeId);
  }

  row(sessionId, title, temporary = false) {
    const li = element("li", "session-item");
    li.dataset.sessionId = sessionId;
    li.dataset.title = title;
    li.dataset.temporary = String(temporary);
    const link = element("a", "session-link");
    link.href = this.urlFor(sessionId);
    link.append(element("span", "session-name", title || UNTITLED));
    if (temporary) {
      link.append(element("span", "session-badge", "Temporary"));
    }
    link.append(element("span", "session-time"));
    link.addEventListener("click", (event) => {
      if (event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey) {
        event.preventDefault();
        this.onOpen(sessionId);
      }
    });
    const name = title || UNTITLED;
    const rename = iconButton(`Rename “${name}”`, "rename-chat", "✎");
    rename.addEventListener("click", () => this.startRename(sessionId));
    const remove = iconButton(`Delete “${name}”`, "delete-chat", "×");
    remove.addEventListener("click", () => this.confirmDelete(sessionId));
    const actions = element("div", "session-actions");
    actions.append(rename, remove);
    li.append(link, actions);
    return li;
  }

  setActive(sessionId) {
    if (this.activeId && this.activeId !== sessionId && this.isTemporary(this.activeId)) {
      this.item(this.activeId)?.remove();
    }
    this.activeId = sessionId;
    for (const li of this.list.children) {
      const link = li.querySelector(".session-link");
      if (li.dataset.sessionId === sessionId) {
        link.setAttribute("aria-current", "page");
      } else {
        link.removeAttribute("aria-current");
      }
    }
  }

  /** Show the title as entered; the server normalises it and answers the stored one. */
  setTitle(sessionId, title) {
    const li = this.item(sessionId);
    if (li) {
      const row = this.row(sessionId, title, li.dataset.temporary === "true");
      row.querySelector(".session-time").textContent = li.querySelector(".session-time").textContent;
      li.replaceWith(row);
      this.setActive(this.activeId);
    }
  }

  /** Save a new title for a chat; resolves to the stored title, or null if it failed. */
  async rename(sessionId, title) {
    try {
      const session = await this.api.renameSession(sessionId, title);
      this.setTitle(sessionId, session.title);
      this.onRenamed(sessionId, session.title);
      return session.title;
    } catch (error) {
      this.onError(`Could not rename the chat: ${error.message}`);
      return null;
    }
  }

  startRename(sessionId) {
    const li = this.item(sessionId);
    const form = element("form", "rename-form");
    const input = element("input", "rename-input");
    input.type = "text";
    input.maxLength = 200;
    input.value = li.dataset.title;
    input.setAttribute("aria-label", "Chat title");
    form.append(input);
    const link = li.querySelector(".session-link");
    let done = false;
    const finish = async (save) => {
      if (done) {
        return;
      }
      done = true;
      const title = input.value.trim();
      form.replaceWith(link);
      li.classList.remove("renaming");
      if (save && title !== li.dataset.title) {
        await this.rename(sessionId, title);
      }
      this.item(sessionId)?.querySelector(".rename-chat")?.focus();
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      finish(true);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
    li.classList.add("renaming");
    link.replaceWith(form);
    input.focus();
    input.select();
  }

  async confirmDelete(sessionId) {
    const name = this.titleOf(sessionId) || UNTITLED;
    let forgotten = 0;
    try {
      forgotten = (await this.api.getPendingMemory(sessionId)).forgotten_with_it ?? 0;
    } catch {
      forgotten = 0;
    }
    const memories =
      forgotten === 0
        ? ""
        : `, and ${forgotten} ${forgotten === 1 ? "memory" : "memories"} drawn only from it,`;
    document.getElementById("delete-dialog-text").textContent =
      `“${name}” and its messages and chat state${memories} will be deleted. ` +
      "Memories it shares with other chats are derived again from those. This cannot be undone.";
    this.dialog.returnValue = "";
    this.dialog.addEventListener(
      "close",
      () => {
        if (this.dialog.returnValue === "delete") {
          this.delete(sessionId);
        }
      },
      { once: true },
    );
    this.dialog.showModal();
  }

  async delete(sessionId) {
    try {
      await this.api.deleteSession(sessionId);
    } catch (error) {
      if (error.status !== 404) {
        this.onError(`Could not delete the chat: ${error.message}`);
        return;
      }
    }
    const li = this.item(sessionId);
    const next = li?.nextElementSibling ?? li?.previousElementSibling;
    li?.remove();
    if (!this.list.children.length) {
      this.status.textContent = "No chats yet.";
    }
    this.onDeleted(sessionId);
    (next?.querySelector(".session-link") ?? document.getElementById("new-chat")).focus();
  }
}
