// Overview: every queue with its counts by state, processed and failed
// per minute, paused or not; totals and charts over all queues.

import { call, paths, readOnly } from '../api.js';
import { h, num, rate, dur, badge, link, card } from '../dom.js';
import { page, header, table, part, rows } from '../page.js';
import { record, rates, chartData } from '../series.js';
import { queueCharts } from '../chart.js';
import { setPaused } from '../actions.js';

const STATES = ['active', 'pending', 'scheduled', 'retry', 'archived', 'completed', 'aggregating'];

export function mount(main) {
  let filter = '';
  let last = [];
  const input = h('input', {
    type: 'search', class: 'filter', placeholder: 'Filter queues', 'aria-label': 'Filter queues',
    oninput: (ev) => { filter = ev.target.value.trim().toLowerCase(); draw(last); },
  });
  const cards = part('div', { class: 'cards' });
  const charts = h('div', { class: 'charts' });
  const empty = part();
  const list = table(['Queue', 'Mode', ...STATES.map((s) => h('th', { class: 'num', text: s })),
    h('th', { class: 'num', text: 'processed/min' }), h('th', { class: 'num', text: 'failed/min' }),
    h('th', { class: 'num', text: 'latency' }), readOnly ? null : h('th', {})], [], { class: 'queues', id: 'queues' });

  const p = page(main, 'overview', async () => (await call('GET', paths.queues())).queues, (queues, body) => {
    record(queues);
    last = queues;
    if (!body.firstChild) body.append(cards, charts, empty, list);
    draw(queues);
  });
  p.head.append(header('Queues', [], [input]));

  function draw(queues) {
    const tot = { size: 0, active: 0, pending: 0, retry: 0, archived: 0 };
    for (const q of queues) for (const k of Object.keys(tot)) tot[k] += q.stats?.[k] || 0;
    const r = rates();
    cards.update([queues.length, tot, r], () => [
      card('queues', num(queues.length)),
      card('tasks', num(tot.size)),
      card('active', num(tot.active)),
      card('pending', num(tot.pending)),
      card('retry', num(tot.retry)),
      card('archived', num(tot.archived)),
      card('processed / min', rate(r.processed), { id: 'total-processed-rate' }),
      card('failed / min', rate(r.failed))]);
    const cd = chartData();
    charts.replaceChildren(...queueCharts(cd));
    const shown = filter ? queues.filter((q) => q.name.toLowerCase().includes(filter)) : queues;
    empty.update([queues.length === 0, shown.length === 0], () =>
      queues.length === 0 ? h('p', { class: 'empty', text: 'No queues yet. Enqueue a task or create a queue through the API.' })
        : shown.length === 0 ? h('p', { class: 'empty', text: 'No queue matches the filter.' }) : null);
    list.hidden = shown.length === 0;
    rows(list.tbody, shown, (q) => q.name, (q) => [q.mode, q.paused], row);
  }

  // row builds a queue's row; its set(q) writes the figures.
  function row(q) {
    const cells = Object.fromEntries(STATES.map((s) => [s, h('td', { class: 'num', dataset: { col: s } })]));
    const processed = h('td', { class: 'num', dataset: { col: 'processed-rate' } });
    const failed = h('td', { class: 'num', dataset: { col: 'failed-rate' } });
    const latency = h('td', { class: 'num', dataset: { col: 'latency' } });
    const tr = h('tr', { dataset: { queue: q.name } },
      h('td', {}, link(`/ui/queues/${encodeURIComponent(q.name)}`, q.name, { class: 'queue-name' }), q.paused ? badge('paused') : null),
      h('td', {}, badge(q.mode, 'mode')),
      STATES.map((s) => cells[s]), processed, failed, latency,
      readOnly ? null : h('td', { class: 'actions' }, h('button', {
        type: 'button', class: 'btn btn-small', dataset: { action: q.paused ? 'resume' : 'pause' },
        text: q.paused ? 'Resume' : 'Pause',
        onclick: async (ev) => {
          ev.currentTarget.disabled = true;
          await setPaused(q.name, !q.paused);
          p.refresh();
        },
      })));
    tr.set = (cur) => {
      const st = cur.stats || {};
      const r = rates(cur.name);
      for (const s of STATES) {
        cells[s].textContent = num(st[s] || 0);
        cells[s].classList.toggle('zero', !st[s]);
      }
      processed.textContent = rate(r.processed);
      failed.textContent = rate(r.failed);
      failed.classList.toggle('bad', !!r.failed);
      latency.textContent = st.pending ? dur(st.latency_ms) : '–';
    };
    return tr;
  }
  return p;
}
