// The REST calls of the chat page: JSON in and out, the CSRF token on every write.

/** A refused or failed REST call; `status` is 0 when the server could not be reached. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

const EVENTS_PAGE_SIZE = 500;

function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]').content;
}

function problem(data, response) {
  if (data && typeof data.detail === "string") {
    return data.detail;
  }
  if (data && typeof data === "object") {
    return Object.entries(data)
      .map(([field, messages]) => `${field}: ${[].concat(messages).join(" ")}`)
      .join("; ");
  }
  return `The server answered ${response.status} ${response.statusText}.`;
}

/** Send one request; resolves to the parsed JSON body (null for 204), rejects with ApiError. */
async function request(method, url, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method !== "GET") {
    init.headers["X-CSRFToken"] = csrfToken();
  }
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new ApiError(0, "The server could not be reached. Check your connection and try again.");
  }
  if (response.status === 204) {
    return null;
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, problem(data, response));
  }
  return data;
}

/** The sessions API under `sessionsUrl` (e.g. "/api/sessions/"). */
export class SessionsApi {
  constructor(sessionsUrl, appName) {
    this.sessionsUrl = sessionsUrl;
    /** The app whose chats are listed and created. */
    this.appName = appName;
  }

  /** The URL of the session (ids are unique within an app), with `query`'s parameters. */
  sessionUrl(sessionId, suffix = "", query = {}) {
    const params = new URLSearchParams({ ...query, app_name: this.appName });
    return `${this.sessionsUrl}${encodeURIComponent(sessionId)}/${suffix}?${params}`;
  }

  /** One page of the user's sessions, newest first: {results, next_page_token}. */
  listSessions({ pageSize, pageToken }) {
    const query = new URLSearchParams({ page_size: String(pageSize), app_name: this.appName });
    if (pageToken) {
      query.set("page_token", pageToken);
    }
    return request("GET", `${this.sessionsUrl}?${query}`);
  }

  /** A new chat; a `temporary` one neither reads nor writes long-term memory. */
  createSession({ temporary = false } = {}) {
    const body = { app_name: this.appName };
    if (temporary) {
      body.temporary = true;
    }
    return request("POST", this.sessionsUrl, body);
  }

  getSession(sessionId) {
    return request("GET", this.sessionUrl(sessionId, "", { num_recent_events: "0" }));
  }

  renameSession(sessionId, title) {
    return request("PATCH", this.sessionUrl(sessionId), { title });
  }

  deleteSession(sessionId) {
    return request("DELETE", this.sessionUrl(sessionId));
  }

  /** Every event of the session's history, in order, fetched a page at a time. */
  async listEvents(sessionId) {
    const events = [];
    let after = 0;
    while (after !== null) {
      const query = { after_sequence: String(after), page_size: String(EVENTS_PAGE_SIZE) };
      const page = await request("GET", this.sessionUrl(sessionId, "events/", query));
      events.push(...page.results);
      after = page.next_after_sequence;
    }
    return events;
  }

  /** What of the session waits to be remembered: {unprocessed_turns, turns, job, create}. */
  getPendingMemory(sessionId) {
    const app = new URLSearchParams({ app_name: this.appName });
    return request("GET", `/api/memory-pending/${encodeURIComponent(sessionId)}/?${app}`);
  }

  /** The user's chats of the app whose title or messages hold every word: {results}. */
  searchChats(searchUrl, query) {
    const params = new URLSearchParams({ q: query, app_name: this.appName });
    return request("GET", `${searchUrl}?${params}`);
  }

  /** The session's state by scope: {session, user, app, merged}. */
  getState(sessionId) {
    return request("GET", this.sessionUrl(sessionId, "state/"));
  }
}
