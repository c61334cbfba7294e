// A task: its fields, payload and result (as JSON, text or hex), last
// error, attempts, for a URL task the target, the last answer's status
// and its callbacks (each with the task that makes its request), and the
// actions its state allows.

import { call, paths, APIError } from '../api.js';
import { h, num, dur, badge, link, when, clip } from '../dom.js';
import { page, table, part, clockTick } from '../page.js';
import { actionButtons } from '../actions.js';

const URL_TYPE = 'htq:url';

/** preview is one line about a task's payload, for lists. */
export function preview(t) {
  if (t.type === URL_TYPE && t.payload) return `${t.payload.method || 'POST'} ${t.payload.url}`;
  if (t.payload !== undefined) return JSON.stringify(t.payload);
  if (t.payload_base64) return `${atob(t.payload_base64).length} bytes of binary`;
  return '';
}

// bytesOf returns the bytes of a payload or result shown as JSON or base64.
function bytesOf(json, b64) {
  if (json !== undefined) return new TextEncoder().encode(JSON.stringify(json));
  if (b64) return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new Uint8Array(0);
}

// hexDump shows bytes 16 to a line: offset, hex, and the printable ones.
function hexDump(b) {
  const lines = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = b.subarray(i, i + 16);
    const hex = Array.from(row, (x) => x.toString(16).padStart(2, '0')).join(' ');
    const txt = Array.from(row, (x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${txt}`);
  }
  return lines.join('\n');
}

// viewer shows bytes as JSON, text or hex, switched by tabs; id names it
// for the tests. The first view that fits is shown.
function viewer(id, json, b64) {
  const b = bytesOf(json, b64);
  if (b.length === 0) return h('p', { class: 'muted', text: 'empty' });
  let text = null;
  try { text = new TextDecoder('utf-8', { fatal: true }).decode(b); } catch { /* not UTF-8 */ }
  const views = {};
  if (json !== undefined) views.JSON = JSON.stringify(json, null, 2);
  if (text !== null) views.Text = text;
  views.Hex = hexDump(b);
  const pre = h('pre', { class: 'code', id: `${id}-view` });
  const tabs = h('div', { class: 'seg', role: 'tablist' });
  const pick = (name) => {
    pre.textContent = views[name];
    pre.dataset.view = name;
    for (const btn of tabs.children) btn.classList.toggle('active', btn.dataset.view === name);
  };
  for (const name of Object.keys(views)) {
    tabs.append(h('button', { type: 'button', class: 'seg-btn', dataset: { view: name }, text: name, onclick: () => pick(name) }));
  }
  pick(Object.keys(views)[0]);
  return h('div', { class: 'viewer' }, h('div', { class: 'viewer-head' }, tabs, h('span', { class: 'muted', text: `${num(b.length)} bytes` })), pre);
}

// lastStatus is the HTTP status of a URL task's last answer: from its
// result, else from the error of its last attempt.
function lastStatus(t) {
  if (t.result && typeof t.result.status === 'number') return t.result.status;
  const m = /status (\d{3})\b/.exec(t.last_error || '');
  return m ? Number(m[1]) : null;
}

export function mount(main, { queue, id }) {
  const qbase = `/ui/queues/${encodeURIComponent(queue)}`;
  const load = () => call('GET', paths.task(queue, id)).catch((err) => {
    if (err instanceof APIError && err.status === 404) return { gone: true, message: err.message };
    throw err;
  });
  // Each part is rebuilt only when what it shows changed: the buttons stay
  // under the pointer, and the payload keeps the view the user picked.
  const headPart = part();
  const details = part('div', { class: 'grid-2' });
  const error = part();
  const payload = part();
  const result = part();
  const p = page(main, 'task', load, (t, body) => {
    if (!body.firstChild) body.append(headPart, details, error, payload, result);
    headPart.update([t.gone, t.state], () => h('div', { class: 'view-head' },
      h('h1', {}, link('/ui/', 'Queues', { class: 'crumb' }), ' / ', link(qbase, queue, { class: 'crumb' }), ' / ', h('span', { class: 'mono', text: id })),
      h('div', { class: 'head-badges' }, t.gone ? null : badge(t.state)),
      h('div', { class: 'head-actions' }, t.gone ? null : actionButtons(queue, t, () => p.refresh(), false))));
    if (t.gone) {
      details.update('gone', () => h('p', { class: 'empty', text: 'This task no longer exists: it was deleted, or it completed without retention.' }));
      for (const part of [error, payload, result]) part.update(null, () => null);
      return;
    }
    details.update([t, clockTick()], () => detailPanels(queue, t));
    error.update(t.last_error || '', () => (t.last_error
      ? h('div', { class: 'panel panel-error' }, h('h2', { text: 'Last error' }), h('pre', { class: 'code', id: 'last-error', text: t.last_error })) : null));
    payload.update([t.payload, t.payload_base64], () => h('div', { class: 'panel' }, h('h2', { text: 'Payload' }), viewer('payload', t.payload, t.payload_base64)));
    result.update([t.result, t.result_base64], () => ((t.result !== undefined || t.result_base64)
      ? h('div', { class: 'panel' }, h('h2', { text: 'Result' }), viewer('result', t.result, t.result_base64)) : null));
  });
  return p;
}

// callbackWhen says when a callback of kind is made, for a task in state
// whose callback's task is not (or no longer) there.
function callbackWhen(kind, state) {
  const due = kind === 'callback' ? 'completed' : 'archived';
  if (state === due) return 'made; its task is no longer kept';
  if (state === 'completed' || state === 'archived') return `not made: the task was ${state}`;
  return kind === 'callback' ? 'made when the task succeeds' : 'made when the task is archived after its last attempt';
}

// callbacksPanel shows a URL task's callbacks: each URL (as the API gives
// it, a password hidden) and the task that makes its request, linked, with
// its state, retries and last error.
function callbacksPanel(queue, t) {
  const qbase = `/ui/queues/${encodeURIComponent(queue)}/tasks/`;
  const rows = t.callbacks.map((c) => {
    const made = c.task
      ? [link(qbase + encodeURIComponent(c.task_id), c.task_id, { class: 'mono', id: `callback-task-${c.kind}` }), ' ', badge(c.task.state),
        ` retries ${c.task.retried} of ${c.task.max_retry}`,
        c.task.last_error ? h('div', { class: 'mono muted', text: clip(c.task.last_error, 160) }) : null]
      : h('span', { class: 'muted', text: callbackWhen(c.kind, t.state) });
    return h('tr', { dataset: { kind: c.kind } },
      h('th', { text: c.kind === 'callback' ? 'On success' : 'On failure' }),
      h('td', {}, h('div', { class: 'mono', text: `POST ${c.url}` }), h('div', { class: 'callback-task' }, made)));
  });
  return h('div', { class: 'panel', id: 'callbacks' }, h('h2', { text: 'Callbacks' }), table([], rows, { class: 'kv' }));
}

// isCallback reports whether t is the task that makes another's callback.
function isCallback(t) {
  return t.type === URL_TYPE && t.payload?.callback_of?.task_id;
}

// detailPanels shows a task's fields and, for a URL task, its request,
// the status of its last answer and its callbacks.
function detailPanels(queue, t) {
  const isURL = t.type === URL_TYPE && t.payload;
  const fields = [
    ['State', badge(t.state)],
    ['Type', h('span', { class: 'mono', text: t.type })],
    ['Retries', `${t.retried} of ${t.max_retry}`],
    t.group ? ['Group', t.group] : null,
    t.priority ? ['Priority', String(t.priority)] : null,
    t.key ? ['Key', h('span', { class: 'mono', text: t.key })] : null,
    isCallback(t) ? ['Callback of', [link(`/ui/queues/${encodeURIComponent(queue)}/tasks/${encodeURIComponent(t.payload.callback_of.task_id)}`,
      t.payload.callback_of.task_id, { id: 'callback-of-link', class: 'mono' }), ` (its ${t.payload.callback_of.kind.replace('_', ' ')})`]] : null,
    t.workflow ? ['Workflow', [link(`/ui/workflows/${encodeURIComponent(t.workflow)}`, t.workflow, { id: 'workflow-link', class: 'mono' }), ` (task ${t.workflow_task})`]] : null,
    t.next_process_at ? ['Next run', when(t.next_process_at)] : null,
    t.last_failed_at ? ['Last failed', when(t.last_failed_at)] : null,
    t.completed_at ? ['Completed', when(t.completed_at)] : null,
    t.timeout_ms ? ['Timeout', dur(t.timeout_ms)] : null,
    t.deadline ? ['Deadline', when(t.deadline)] : null,
    t.retention_ms ? ['Retention', dur(t.retention_ms)] : null,
    t.is_orphaned ? ['Orphaned', 'yes: its worker stopped heartbeating; it will be recovered'] : null,
  ].filter(Boolean);
  const kv = (k, v, props = {}) => h('tr', {}, h('th', { text: k }), h('td', props, v));
  const status = isURL ? lastStatus(t) : null;
  const u = t.payload;
  return [
    h('div', { class: 'panel' }, h('h2', { text: 'Task' }), table([], fields.map(([k, v]) => kv(k, v)), { class: 'kv' })),
    isURL ? h('div', { class: 'panel', id: 'url-target' }, h('h2', { text: 'URL task' }), table([], [
      kv('Target', [h('b', { text: u.method || 'POST' }), ' ', u.url], { class: 'mono' }),
      kv('Last response', [
        status ? badge(String(status), status < 300 ? 'ok' : status < 500 ? 'warn' : 'bad') : h('span', { class: 'muted', text: 'none yet' }),
        t.result?.duration_ms ? ` in ${dur(t.result.duration_ms)}` : ''], { id: 'last-status' }),
      Object.keys(u.headers || {}).length ? kv('Headers', Object.entries(u.headers).map(([k, v]) => h('div', { text: `${k}: ${v}` })), { class: 'mono' }) : null,
      u.body || u.body_base64 ? kv('Body', clip(u.body, 120) || `${atob(u.body_base64).length} bytes of binary`, { class: 'mono' }) : null,
      u.timeout_ms ? kv('Timeout', dur(u.timeout_ms)) : null,
      u.variable ? kv('Repeats', `every ${dur((u.variable.interval_s || 0) * 1000)} (variable queue)`) : null,
    ], { class: 'kv' })) : null,
    t.callbacks?.length ? callbacksPanel(queue, t) : null,
  ];
}
