// Schedules: every stored schedule with its spec, queue, task and runs.

import { call, paths } from '../api.js';
import { h, link, when } from '../dom.js';
import { page, header, table, part, clockTick } from '../page.js';
import { preview } from './task.js';

// The next and previous run of a schedule, under the names the API may
// give them.
const next = (sc) => sc.next_run_at ?? sc.next_enqueue_at ?? sc.next;
const prev = (sc) => sc.prev_run_at ?? sc.prev_enqueue_at ?? sc.last_run_at ?? sc.prev;

export function mount(main) {
  const content = part();
  const p = page(main, 'schedules', () => call('GET', paths.schedules()), (res, body) => {
    if (!body.firstChild) body.append(content);
    content.update([res, clockTick()], () => view(res.schedules || []));
  });
  p.head.append(header('Schedules'));
  return p;
}

// view shows the schedules of GET /v1/schedules.
function view(list) {
  if (list.length === 0) return h('p', { class: 'empty', text: 'No schedules. Create one with POST /v1/schedules.' });
  const hasRuns = list.some((sc) => next(sc) !== undefined);
  const rows = list.map((sc) => h('tr', { dataset: { schedule: sc.id } },
    h('td', { class: 'mono', title: sc.id, text: sc.id.slice(0, 12) }),
    h('td', { class: 'mono', text: sc.cron }),
    h('td', {}, link(`/ui/queues/${encodeURIComponent(sc.queue)}`, sc.queue)),
    h('td', { class: 'mono', text: sc.task_type === 'htq:url' ? preview({ type: sc.task_type, payload: sc.task }) : sc.task_type }),
    h('td', {}, hasRuns ? when(next(sc)) : h('span', { class: 'muted', text: '–' })),
    h('td', {}, hasRuns ? when(prev(sc)) : h('span', { class: 'muted', text: '–' })),
    h('td', {}, when(sc.created_at))));
  return [
    table(['ID', 'Spec', 'Queue', 'Task', 'Next run', 'Last run', 'Created'], rows, { class: 'schedules' }),
    hasRuns ? null : h('p', { class: 'notice', text: 'Next and last runs show once the API reports them with each schedule (the schedule history endpoint).' })];
}
