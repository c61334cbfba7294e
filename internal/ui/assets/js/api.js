// The /v1 API, called with the session cookie and the session's CSRF
// token (the server accepts the cookie only with it).

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content ?? '';

/** csrf is the session's CSRF token, sent with every call. */
export const csrf = meta('htq-csrf');

/** readOnly is true when the dashboard is read-only (--ui-read-only). */
export const readOnly = meta('htq-read-only') === 'true';

/** APIError is an error answer of the API: {"error":{"code","message"}}. */
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** toLogin sends the browser to the login page, back here afterwards. */
export function toLogin() {
  location.assign('/ui/login?next=' + encodeURIComponent(location.pathname + location.search));
}

/** call sends one API request and returns its JSON answer (null for none). */
export async function call(method, path, body) {
  const opts = { method, headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  if (res.status === 401) {
    toLogin();
    throw new APIError(401, 'unauthorized', 'the session has ended');
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    const e = (data && data.error) || {};
    throw new APIError(res.status, e.code || `http_${res.status}`, e.message || res.statusText);
  }
  return data;
}

const q = encodeURIComponent;

/** The API's paths, in one place. */
export const paths = {
  queues: () => '/v1/queues',
  queue: (name) => `/v1/queues/${q(name)}`,
  pause: (name) => `/v1/queues/${q(name)}/pause`,
  resume: (name) => `/v1/queues/${q(name)}/resume`,
  tasks: (name, params) => `/v1/queues/${q(name)}/tasks?${new URLSearchParams(params)}`,
  task: (name, id) => `/v1/queues/${q(name)}/tasks/${q(id)}`,
  taskAction: (name, id, action) => `/v1/queues/${q(name)}/tasks/${q(id)}/${action}`,
  bulk: (name) => `/v1/queues/${q(name)}/bulk`,
  groups: (name) => `/v1/queues/${q(name)}/groups`,
  keys: (name) => `/v1/queues/${q(name)}/keys`,
  series: (name) => `/v1/queues/${q(name)}/series?minutes=60`,
  history: (name, days) => `/v1/queues/${q(name)}/history?days=${days}`,
  servers: () => '/v1/servers',
  schedules: () => '/v1/schedules',
  schedule: (id) => `/v1/schedules/${q(id)}`,
  scheduleHistory: (id) => `/v1/schedules/${q(id)}/history`,
  workflow: (id) => `/v1/workflows/${q(id)}`,
  workflowCancel: (id) => `/v1/workflows/${q(id)}/cancel`,
  events: () => '/v1/events',
};
