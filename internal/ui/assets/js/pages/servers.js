// Servers: every live server (Go Servers, htq serve's URL worker, pull
// workers) and what each runs.

import { call, paths } from '../api.js';
import { h, num, badge, link, when } from '../dom.js';
import { page, header, table, part, clockTick } from '../page.js';

export function mount(main) {
  const load = () => call('GET', paths.servers());
  const content = part();
  const p = page(main, 'servers', load, (res, body) => {
    if (!body.firstChild) body.append(content);
    content.update([res, clockTick()], () => view(res));
  });
  p.head.append(header('Servers'));
  return p;
}

// view shows the servers of GET /v1/servers: Go Servers and htq serve's
// URL workers (status active, or stopped while shutting down), and pull
// workers that name themselves with worker_id (status pull).
function view(res) {
  const list = res.servers || [];
  if (list.length === 0) return h('p', { class: 'empty', text: 'No server is running.' });
  const rows = list.map((sv) => {
    const workers = sv.active_tasks || [];
    const queues = sv.queues || {};
    const names = Object.keys(queues).sort();
    const pull = sv.status === 'pull';
    return h('tr', { dataset: { server: sv.id } },
      h('td', { class: 'mono', text: sv.id }),
      h('td', {}, badge(pull ? 'pull worker' : 'server', 'mode')),
      h('td', { text: `${sv.host || '–'}${sv.pid ? `:${sv.pid}` : ''}` }),
      h('td', {}, names.map((q) => h('span', { class: 'chip' }, link(`/ui/queues/${encodeURIComponent(q)}`, q),
        pull ? null : h('small', { text: ` ×${queues[q]}` })))),
      h('td', { class: 'num', text: `${num(workers.length)} / ${num(sv.concurrency)}` }),
      h('td', {}, badge(pull ? 'active' : sv.status, sv.status === 'stopped' ? 'warn' : 'ok')),
      h('td', {}, when(sv.started)),
      h('td', {}, workers.slice(0, 5).map((w) => h('div', { class: 'mono small' },
        link(`/ui/queues/${encodeURIComponent(w.queue)}/tasks/${encodeURIComponent(w.task_id)}`, w.task_id), ` ${w.type || ''}`)),
      workers.length > 5 ? h('div', { class: 'muted small', text: `and ${workers.length - 5} more` }) : null));
  });
  return table(['ID', 'Kind', 'Host', 'Queues', h('th', { class: 'num', text: 'Busy' }), 'Status', 'Started', 'Running'], rows, { class: 'servers' });
}
