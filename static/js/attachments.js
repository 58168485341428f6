// Files attached to the next message: picked with the Attach button, dropped on the composer or
// pasted into it; uploaded to the chat when the message is sent, then named in its frame.

import { element } from "./render.js";

function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]').content;
}

/** The download and preview URLs of a stored file, under the API's `artifacts/`. */
export function artifactUrls(sessionsUrl, id) {
  const base = sessionsUrl.replace(/sessions\/$/, "artifacts/") + encodeURIComponent(id);
  return { content: `${base}/content/`, thumbnail: `${base}/thumbnail/` };
}

/** The files a stored user message carries (its custom_metadata.attachments), as links:
 *  a preview for an image, the name for a document; only their owner can open them. */
export function attachmentList(sessionsUrl, files) {
  const list = element("ul", "attachment-list");
  list.setAttribute("aria-label", "Attached files");
  for (const file of files) {
    const urls = artifactUrls(sessionsUrl, file.id);
    const link = element("a", "attachment-link");
    link.href = urls.content;
    link.target = "_blank";
    link.rel = "noopener";
    if (file.mime_type.startsWith("image/")) {
      const image = element("img", "attachment-thumbnail");
      image.src = urls.thumbnail;
      image.alt = file.filename;
      link.append(image);
    } else {
      link.append(element("span", "attachment-name", file.filename));
    }
    const item = element("li", "attachment");
    item.append(link);
    list.append(item);
  }
  return list;
}

export class AttachmentTray {
  constructor({ tray, input, button, dropTargets, pasteTarget, sessionsUrl, onChange }) {
    this.files = [];
    this.tray = tray;
    this.sessionsUrl = sessionsUrl;
    this.onChange = onChange;
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      this.add([...input.files]);
      input.value = "";
    });
    for (const target of dropTargets) {
      target.addEventListener("dragover", (event) => {
        if ([...(event.dataTransfer?.types ?? [])].includes("Files")) {
          event.preventDefault();
        }
      });
      target.addEventListener("drop", (event) => {
        if (event.dataTransfer?.files?.length) {
          event.preventDefault();
          this.add([...event.dataTransfer.files]);
        }
      });
    }
    pasteTarget.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files ?? [])];
      if (files.length) {
        event.preventDefault();
        this.add(files);
      }
    });
  }

  add(files) {
    this.files.push(...files);
    this.render();
  }

  clear() {
    this.files = [];
    this.render();
  }

  render() {
    this.tray.replaceChildren();
    this.files.forEach((file, index) => {
      const item = element("li", "tray-file");
      item.append(element("span", "tray-name", file.name || "pasted file"));
      const remove = element("button", "button button-quiet tray-remove", "Remove");
      remove.type = "button";
      remove.setAttribute("aria-label", `Remove ${file.name || "pasted file"}`);
      remove.addEventListener("click", () => {
        this.files.splice(index, 1);
        this.render();
      });
      item.append(remove);
      this.tray.append(item);
    });
    this.tray.hidden = this.files.length === 0;
    this.onChange?.();
  }

  /** Upload the files to the chat; their ids, in order. The server checks each file by its
   *  content and stores all or none: a refusal rejects with its reason and keeps the tray. */
  async upload(sessionId) {
    if (!this.files.length) {
      return [];
    }
    const body = new FormData();
    for (const file of this.files) {
      body.append("file", file, file.name || `pasted.${(file.type.split("/")[1] || "bin")}`);
    }
    const url = `${this.sessionsUrl}${encodeURIComponent(sessionId)}/artifacts/`;
    let response;
    try {
      response = await fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
        body,
      });
    } catch {
      throw new Error("The files could not be sent. Check your connection and try again.");
    }
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      throw new Error(data?.detail ?? `The server answered ${response.status}.`);
    }
    return data.map((stored) => stored.id);
  }
}
