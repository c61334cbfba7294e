// Overview: every queue with its counts by state, processed and failed
// per minute, paused or not; totals and charts over all queues.

import { call, paths, readOnly } from '../api.js';
import { h, fill, num, rate, dur, badge, link, card } from '../dom.js';
import { page, header, table } from '../page.js';
import { record, rates, chartData } from '../series.js';
import { lineChart } from '../chart.js';
import { setPaused } from '../actions.js';

const STATES = ['active', 'pending', 'scheduled', 'retry', 'archived', 'completed'];

export function mount(main) {
  let filter = '';
  let last = [];
  const input = h('input', {
    type: 'search', class: 'filter', placeholder: 'Filter queues', 'aria-label': 'Filter queues',
    oninput: (ev) => { filter = ev.target.value.trim().toLowerCase(); p.refreshView(); },
  });
  const p = page(main, 'overview', async () => (await call('GET', paths.queues())).queues, (queues, body) => {
    record(queues);
    last = queues;
    draw(body, queues);
  });
  p.refreshView = () => draw(p.body, last);
  p.head.append(header('Queues', [], [input]));

  function draw(body, queues) {
    const tot = { size: 0, active: 0, pending: 0, retry: 0, archived: 0 };
    for (const q of queues) for (const k of Object.keys(tot)) tot[k] += q.stats?.[k] || 0;
    const r = rates();
    const cd = chartData();
    const shown = filter ? queues.filter((q) => q.name.toLowerCase().includes(filter)) : queues;
    fill(body, 
      h('div', { class: 'cards' },
        card('queues', num(queues.length)),
        card('tasks', num(tot.size)),
        card('active', num(tot.active)),
        card('pending', num(tot.pending)),
        card('retry', num(tot.retry)),
        card('archived', num(tot.archived)),
        card('processed / min', rate(r.processed), { id: 'total-processed-rate' }),
        card('failed / min', rate(r.failed))),
      h('div', { class: 'charts' },
        lineChart('Throughput', [
          { name: 'processed', points: cd.processed, kind: 'ok' },
          { name: 'failed', points: cd.failed, kind: 'bad' }], { unit: 'tasks/min' }),
        lineChart('Queue size', [
          { name: 'all tasks', points: cd.size, kind: 'size' },
          { name: 'pending', points: cd.pending, kind: 'pending' }])),
      queues.length === 0
        ? h('p', { class: 'empty', text: 'No queues yet. Enqueue a task or create a queue through the API.' })
        : table(
          ['Queue', 'Mode', ...STATES.map((s) => h('th', { class: 'num', text: s })),
            h('th', { class: 'num', text: 'processed/min' }), h('th', { class: 'num', text: 'failed/min' }),
            h('th', { class: 'num', text: 'latency' }), readOnly ? null : h('th', {})],
          shown.map(row), { class: 'queues', id: 'queues' }));
  }

  function row(q) {
    const st = q.stats || {};
    const r = rates(q.name);
    return h('tr', { dataset: { queue: q.name } },
      h('td', {}, link(`/ui/queues/${encodeURIComponent(q.name)}`, q.name, { class: 'queue-name' }), q.paused ? badge('paused') : null),
      h('td', {}, badge(q.mode, 'mode')),
      STATES.map((s) => h('td', { class: `num ${st[s] ? '' : 'zero'}`, dataset: { col: s }, text: num(st[s] || 0) })),
      h('td', { class: 'num', dataset: { col: 'processed-rate' }, text: rate(r.processed) }),
      h('td', { class: `num ${r.failed ? 'bad' : ''}`, dataset: { col: 'failed-rate' }, text: rate(r.failed) }),
      h('td', { class: 'num', text: st.pending ? dur(st.latency_ms) : '–' }),
      readOnly ? null : h('td', { class: 'actions' }, h('button', {
        type: 'button', class: 'btn btn-small', dataset: { action: q.paused ? 'resume' : 'pause' },
        text: q.paused ? 'Resume' : 'Pause',
        onclick: async (ev) => {
          ev.currentTarget.disabled = true;
          await setPaused(q.name, !q.paused);
          p.refresh();
        },
      })));
  }
  return p;
}
