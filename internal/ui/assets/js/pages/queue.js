// A queue: its figures and charts, its tasks by state in tabs (paged),
// its groups, its fair-sharing keys, a search by task ID, and the actions
// on tasks, on every task of a state, and on the queue.

import { call, paths, readOnly, APIError } from '../api.js';
import { h, num, rate, dur, bytes, badge, link, card, when, clip } from '../dom.js';
import { page, table, part, rows } from '../page.js';
import { recordOne, rates, chartData } from '../series.js';
import { queueCharts, barChart } from '../chart.js';
import { setPaused, actionButtons, bulk, bulkActionsFor, TASK_ACTIONS, toast } from '../actions.js';
import { navigate } from '../nav.js';
import { preview } from './task.js';

const TABS = ['active', 'pending', 'scheduled', 'waiting', 'retry', 'archived', 'completed', 'groups', 'keys'];
const PAGE_SIZE = 20;

// The time column of each state: its head and the task's field.
const TIME_COL = {
  scheduled: ['Runs', 'next_process_at'],
  retry: ['Next try', 'next_process_at'],
  archived: ['Failed', 'last_failed_at'],
  completed: ['Completed', 'completed_at'],
  aggregating: ['Added', 'next_process_at'],
};

export function mount(main, { queue }) {
  const qs = new URLSearchParams(location.search);
  const group = qs.get('group') || '';
  const tab = TABS.includes(qs.get('state')) ? qs.get('state') : group ? 'groups' : 'pending';
  const state = tab === 'groups' ? (group ? 'aggregating' : null) : tab === 'keys' ? null : tab;
  const pageNo = Math.max(1, parseInt(qs.get('page') || '1', 10) || 1);
  const base = `/ui/queues/${encodeURIComponent(queue)}`;
  const here = (params) => `${base}?${new URLSearchParams(params)}`;

  const search = h('form', { class: 'search', onsubmit: find },
    h('input', { type: 'search', name: 'id', placeholder: 'Find a task by ID', 'aria-label': 'Task ID', spellcheck: 'false' }),
    h('button', { type: 'submit', class: 'btn', text: 'Find' }));

  async function find(ev) {
    ev.preventDefault();
    const id = ev.target.elements.id.value.trim();
    if (!id) return;
    try {
      await call('GET', paths.task(queue, id));
      navigate(`${base}/tasks/${encodeURIComponent(id)}`);
    } catch (err) {
      toast(err instanceof APIError && err.status === 404 ? `No task ${id} in queue ${queue}.` : err.message, 'error');
    }
  }

  // The minutes and days before the page opened do not change while it
  // is open: asked once (the page goes on without them if they fail).
  const before = Promise.all([call('GET', paths.series(queue)), call('GET', paths.history(queue, 14))]).catch(() => [null, null]);

  async function load() {
    const [q, list, groups, keys, [series, history]] = await Promise.all([
      call('GET', paths.queue(queue)),
      state ? call('GET', paths.tasks(queue, { state, page: pageNo, page_size: PAGE_SIZE, ...(group ? { group } : {}) })) : null,
      tab === 'groups' && !group ? call('GET', paths.groups(queue)) : null,
      tab === 'keys' ? call('GET', paths.keys(queue)) : null,
      before,
    ]);
    return { q, list, groups, keys, series, history };
  }

  const titlePart = part();
  const cards = part('div', { class: 'cards' });
  const charts = h('div', { class: 'charts' });
  // The tabs and the bulk bar are built once; a refresh writes their
  // counts in place, so a click on them is never lost to a rebuild.
  const tabCounts = {};
  const tabs = h('nav', { class: 'tabs', 'aria-label': 'Task states' }, TABS.map((t) =>
    link(here({ state: t }), [t, ' ', (tabCounts[t] = h('span', { class: 'count' }))],
      { class: t === tab ? 'tab active' : 'tab', dataset: { tab: t } })));
  let total; // of the state shown, for the bulk actions' confirmation
  const barText = h('span', { class: 'muted' });
  const bulkButtons = part('span', { class: 'bulk-buttons' });
  const bar = h('div', { class: 'bulk-bar' }, barText,
    group ? link(here({ state: 'groups' }), '← all groups', { class: 'crumb' }) : null,
    h('span', { class: 'spacer' }), bulkButtons);
  const empty = part();
  const tc = TIME_COL[state];
  const showErr = state === 'retry' || state === 'archived';
  const list = table(['ID', 'Type', 'Payload', h('th', { class: 'num', text: 'Retried' }), tc ? tc[0] : null,
    showErr ? 'Last error' : null, readOnly ? null : h('th', {})], [], { class: 'tasks', id: 'tasks' });
  const pager = part('div', { class: 'pager' });
  const groupPart = part();
  const keyPart = part();

  const daily = part('div', { class: 'charts charts-1' });
  const p = page(main, 'queue', load, ({ q, list: tasks, groups, keys, series, history }, body) => {
    recordOne(q);
    if (!body.firstChild) body.append(cards, charts, daily, tabs, ...(state ? [bar, empty, list, pager] : [tab === 'keys' ? keyPart : groupPart]));
    daily.update(history, () => (history?.days?.length ? barChart(`Last ${history.days.length} days`, history.days) : null));
    const st = q.stats || {};
    titlePart.update([q.name, q.mode, q.paused], () => title(q));
    const r = rates(q.name);
    cards.update([st.size, r, st.processed, st.failed, st.pending ? dur(st.latency_ms) : '', st.memory_bytes], () => [
      card('tasks', num(st.size)),
      card('processed / min', rate(r.processed)),
      card('failed / min', rate(r.failed)),
      card('processed today', num(st.processed)),
      card('failed today', num(st.failed)),
      card('latency', st.pending ? dur(st.latency_ms) : '–'),
      card('memory', bytes(st.memory_bytes))]);
    const cd = chartData(q.name, series);
    charts.replaceChildren(...queueCharts(cd));
    for (const t of TABS) {
      if (t === 'keys') tabCounts[t].textContent = keys?.keys ? num(keys.keys.length) : '';
      else tabCounts[t].textContent = num(t === 'groups' ? st.groups : st[t]);
    }
    if (state) drawTasks(q, tasks, st);
    else if (tab === 'keys') keyPart.update(keys, () => keyList(keys));
    else groupPart.update(groups, () => groupList(groups));
  });
  p.head.append(titlePart, search);

  function title(q) {
    return h('div', { class: 'view-head' },
      h('h1', {}, link('/ui/', 'Queues', { class: 'crumb' }), ' / ', q.name),
      h('div', { class: 'head-badges' }, badge(q.mode, 'mode'), q.paused ? badge('paused') : null),
      h('div', { class: 'head-actions' }, readOnly ? null : h('button', {
        type: 'button', class: q.paused ? 'btn btn-primary' : 'btn', id: 'queue-pause',
        text: q.paused ? 'Resume queue' : 'Pause queue',
        onclick: async () => { await setPaused(q.name, !q.paused); p.refresh(); },
      })));
  }

  function drawTasks(q, tasks, st) {
    total = state === 'aggregating' ? undefined : st[state];
    const some = total !== 0 && tasks.tasks.length > 0;
    barText.textContent = group ? `Group ${group}: aggregating tasks` : `${num(total)} ${state} task${total === 1 ? '' : 's'}`;
    bulkButtons.update(some, () => (some ? bulkActionsFor(state).map((action) => h('button', {
      type: 'button', class: `btn btn-small ${TASK_ACTIONS[action].danger ? 'btn-danger-soft' : ''}`, dataset: { bulk: action },
      text: `${TASK_ACTIONS[action].label} all`,
      onclick: async () => { if ((await bulk(q.name, state, action, total, group || undefined)) !== null) p.refresh(); },
    })) : null));
    empty.update(tasks.tasks.length === 0, () => (tasks.tasks.length === 0
      ? h('p', { class: 'empty', text: pageNo > 1 ? 'No tasks on this page.' : `No ${state} tasks.` }) : null));
    list.hidden = tasks.tasks.length === 0;
    rows(list.tbody, tasks.tasks, (t) => t.id, (t) => [t.state, t.type, t.priority, t.key, t.retried, t.last_error, preview(t)], (t) => taskRow(q, t));
    pager.update([pageNo, tasks.next_page, tasks.tasks.length], () => (tasks.tasks.length === 0 && pageNo === 1 ? null : [
      pageNo > 1 ? link(here({ state: tab, page: pageNo - 1, ...(group ? { group } : {}) }), '← Previous', { class: 'btn btn-small' }) : null,
      h('span', { class: 'muted', text: `Page ${pageNo}` }),
      tasks.next_page ? link(here({ state: tab, page: tasks.next_page, ...(group ? { group } : {}) }), 'Next →', { class: 'btn btn-small' }) : null]));
  }

  // taskRow builds a task's row; its set(t) keeps the time column current.
  function taskRow(q, t) {
    const time = tc ? h('td', {}) : null;
    const tr = h('tr', { dataset: { task: t.id } },
      h('td', { class: 'mono' }, link(`${base}/tasks/${encodeURIComponent(t.id)}`, clip(t.id, 28), { title: t.id })),
      h('td', {}, t.type,
        t.priority ? h('span', { class: 'muted', dataset: { priority: t.priority }, title: 'priority', text: ` · p${t.priority}` }) : null,
        t.key ? h('span', { class: 'muted mono', dataset: { key: t.key }, title: 'fair-sharing key', text: ` · ${clip(t.key, 24)}` }) : null),
      h('td', { class: 'mono preview', text: clip(preview(t), 70) }),
      h('td', { class: 'num', text: `${t.retried} / ${t.max_retry}` }),
      time,
      showErr ? h('td', { class: 'error-cell', title: t.last_error || '', text: clip(t.last_error, 60) }) : null,
      readOnly ? null : h('td', { class: 'actions' }, actionButtons(q.name, t, () => p.refresh())));
    if (time) tr.set = (cur) => time.replaceChildren(when(cur[tc[1]]));
    return tr;
  }

  // keyList shows the keys of GET /v1/queues/{queue}/keys with their
  // pending and running tasks (running ones count against
  // key_max_concurrency).
  function keyList(keys) {
    if (keys.keys.length === 0) return h('p', { class: 'empty', text: 'No key has pending or running tasks.' });
    return table(['Key', h('th', { class: 'num', text: 'Pending' }), h('th', { class: 'num', text: 'Running' })],
      keys.keys.map((k) => h('tr', { dataset: { key: k.key } },
        h('td', { class: 'mono', text: k.key }),
        h('td', { class: 'num', text: num(k.pending) }),
        h('td', { class: 'num', text: num(k.active) }))), { class: 'keys', id: 'keys' });
  }

  // groupList shows the groups of GET /v1/queues/{queue}/groups, each a
  // link to its aggregating tasks.
  function groupList(groups) {
    const list = groups.groups || [];
    if (list.length === 0) return h('p', { class: 'empty', text: 'No group holds aggregating tasks.' });
    return table(['Group', h('th', { class: 'num', text: 'Tasks' })], list.map((g) => h('tr', { dataset: { group: g.group } },
      h('td', {}, link(here({ state: 'groups', group: g.group }), g.group)),
      h('td', { class: 'num', text: num(g.size) }))), { class: 'groups' });
  }
  return p;
}
