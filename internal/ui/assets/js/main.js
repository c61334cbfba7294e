// The dashboard's entry: routes /ui/… paths to pages, keeps the current
// page live, and logs out.

import { csrf } from './api.js';
import { startLive } from './live.js';
import { navigate } from './nav.js';
import * as overview from './pages/overview.js';
import * as queue from './pages/queue.js';
import * as task from './pages/task.js';
import * as servers from './pages/servers.js';
import * as schedules from './pages/schedules.js';
import * as workflow from './pages/workflow.js';

// Each route maps a path to a page module and its parameters. A page
// module exports mount(el, params) → {refresh(), unmount?()}.
const routes = [
  [/^\/ui\/?$/, overview, () => ({}), 'overview'],
  [/^\/ui\/queues\/([^/]+)\/tasks\/([^/]+)$/, task, (m) => ({ queue: dec(m[1]), id: dec(m[2]) }), 'overview'],
  [/^\/ui\/queues\/([^/]+)$/, queue, (m) => ({ queue: dec(m[1]) }), 'overview'],
  [/^\/ui\/servers$/, servers, () => ({}), 'servers'],
  [/^\/ui\/schedules$/, schedules, () => ({}), 'schedules'],
  [/^\/ui\/schedules\/([^/]+)$/, { mount: schedules.mountOne }, (m) => ({ id: dec(m[1]) }), 'schedules'],
  [/^\/ui\/workflows\/([^/]+)$/, workflow, (m) => ({ id: dec(m[1]) }), 'overview'],
];

function dec(s) {
  try { return decodeURIComponent(s); } catch { return s; }
}

const main = document.getElementById('page');
let current = null;

// show mounts the page of the current location.
function show() {
  current?.unmount?.();
  main.replaceChildren();
  const path = location.pathname;
  for (const [re, mod, params, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === nav);
    current = mod.mount(main, params(m));
    current.refresh();
    return;
  }
  current = null;
  main.append(Object.assign(document.createElement('p'), { className: 'empty', textContent: `No page at ${path}.` }));
}

window.addEventListener('htq:navigate', () => {
  show();
  window.scrollTo(0, 0);
});

// In-app links are followed by the router; others, and modified clicks,
// by the browser.
document.addEventListener('click', (ev) => {
  const a = ev.target.closest('a[href]');
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/ui/') || url.pathname.startsWith('/ui/assets/')) return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', show);

document.getElementById('logout').addEventListener('click', async () => {
  await fetch('/ui/logout', { method: 'POST', headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' });
  location.assign('/ui/login');
});

const liveEl = document.getElementById('live');
startLive(() => current?.refresh(), (mode) => {
  document.body.dataset.live = mode;
  liveEl.textContent = mode === 'events' ? 'live' : 'polling 2 s';
  liveEl.title = mode === 'events' ? 'Updated by the event stream GET /v1/events' : 'Refreshed every 2 s until the event stream is back';
  liveEl.className = `live live-${mode}`;
});
show();
