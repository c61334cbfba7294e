// Schedules: every stored schedule with its spec, queue, task and its
// next and last runs; a schedule's own page adds the tasks its last ticks
// enqueued (or why a tick enqueued none).

import { call, paths } from '../api.js';
import { h, link, when, badge } from '../dom.js';
import { page, header, table, part, clockTick } from '../page.js';
import { preview } from './task.js';

const schedulePath = (id) => `/ui/schedules/${encodeURIComponent(id)}`;

// task names what a schedule enqueues: its type, or a URL task's request.
const task = (sc) => (sc.task_type === 'htq:url' ? preview({ type: sc.task_type, payload: sc.task }) : sc.task_type);

export function mount(main) {
  const content = part();
  const p = page(main, 'schedules', () => call('GET', paths.schedules()), (res, body) => {
    if (!body.firstChild) body.append(content);
    content.update([res, clockTick()], () => view(res.schedules || []));
  });
  p.head.append(header('Schedules'));
  return p;
}

// view shows the schedules of GET /v1/schedules. next_run_at and
// prev_run_at come from the live schedulers: absent until one holds the
// schedule, and before its first tick.
function view(list) {
  if (list.length === 0) return h('p', { class: 'empty', text: 'No schedules. Create one with POST /v1/schedules or htq schedule add.' });
  const rows = list.map((sc) => h('tr', { dataset: { schedule: sc.id } },
    h('td', { class: 'mono' }, link(schedulePath(sc.id), sc.id.slice(0, 12), { title: sc.id })),
    h('td', { class: 'mono', text: sc.cron }),
    h('td', {}, link(`/ui/queues/${encodeURIComponent(sc.queue)}`, sc.queue)),
    h('td', { class: 'mono', text: task(sc) }),
    h('td', { dataset: { col: 'next' } }, when(sc.next_run_at)),
    h('td', { dataset: { col: 'prev' } }, when(sc.prev_run_at)),
    h('td', {}, when(sc.created_at))));
  return table(['ID', 'Spec', 'Queue', 'Task', 'Next run', 'Last run', 'Created'], rows, { class: 'schedules' });
}

/** mountOne shows one schedule and its history (GET /v1/schedules/{id}[/history]). */
export function mountOne(main, { id }) {
  const content = part();
  const load = () => Promise.all([call('GET', paths.schedule(id)), call('GET', paths.scheduleHistory(id))]);
  const p = page(main, 'schedule', load, ([sc, hist], body) => {
    if (!body.firstChild) body.append(content);
    content.update([sc, hist, clockTick()], () => one(sc, hist.history || []));
  });
  p.head.append(header([link('/ui/schedules', 'Schedules', { class: 'crumb' }), ' / ', h('span', { class: 'mono', text: id.slice(0, 12) })]));
  return p;
}

function one(sc, history) {
  const kv = (k, v, props = {}) => h('tr', {}, h('th', { text: k }), h('td', props, v));
  const fields = table([], [
    kv('ID', sc.id, { class: 'mono' }),
    kv('Spec', sc.cron, { class: 'mono' }),
    kv('Queue', link(`/ui/queues/${encodeURIComponent(sc.queue)}`, sc.queue)),
    kv('Task', task(sc), { class: 'mono' }),
    kv('Next run', when(sc.next_run_at), { id: 'next-run' }),
    kv('Last run', when(sc.prev_run_at), { id: 'prev-run' }),
    kv('Created', when(sc.created_at))], { class: 'kv' });
  const rows = history.map((run) => h('tr', { dataset: { tick: run.tick } },
    h('td', {}, when(run.tick)),
    h('td', {}, when(run.enqueued_at)),
    h('td', { class: 'mono' }, run.task_id
      ? link(`/ui/queues/${encodeURIComponent(sc.queue)}/tasks/${encodeURIComponent(run.task_id)}`, run.task_id)
      : badge('none', 'warn')),
    h('td', { class: 'mono small', title: run.scheduler_id, text: run.scheduler_id.slice(0, 12) }),
    h('td', { class: 'error-cell', text: run.error || '' })));
  return [
    h('div', { class: 'panel' }, h('h2', { text: 'Schedule' }), fields),
    h('div', { class: 'panel' }, h('h2', { text: 'Last runs' }), rows.length
      ? table(['Tick', 'Enqueued', 'Task', 'Scheduler', 'Error'], rows, { class: 'history' })
      : h('p', { class: 'empty', text: 'No tick yet.' }))];
}
