// What the buttons do: queue pause and resume, the task actions, the
// bulk actions of a state, each confirmed when it destroys or moves many
// tasks. In read-only mode no page shows them, and the server refuses them.

import { call, paths, readOnly } from './api.js';
import { h } from './dom.js';

/** toast shows a short message in the corner for a few seconds. */
export function toast(text, kind = 'info') {
  if (kind === 'error') console.error(text);
  const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status', text });
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

let settle = null; // resolves the confirmation on screen

// answer closes the dialog and settles its confirmation with ok. The
// buttons answer at once rather than through the dialog's close event,
// which comes later and could settle the next confirmation.
function answer(ok) {
  const dlg = document.getElementById('confirm');
  const s = settle;
  settle = null;
  if (dlg.open) dlg.close();
  s?.(ok);
}

function setUpDialog() {
  const dlg = document.getElementById('confirm');
  if (dlg.dataset.ready) return;
  dlg.dataset.ready = 'yes';
  document.getElementById('confirm-ok').addEventListener('click', (ev) => { ev.preventDefault(); answer(true); });
  document.getElementById('confirm-cancel').addEventListener('click', (ev) => { ev.preventDefault(); answer(false); });
  dlg.addEventListener('cancel', (ev) => { ev.preventDefault(); answer(false); }); // Escape
}

/** confirm asks in a dialog and resolves to true when confirmed. */
export function confirm(title, text, okLabel = 'Confirm') {
  setUpDialog();
  answer(false); // a confirmation still on screen is a no
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = okLabel;
  return new Promise((resolve) => {
    settle = resolve;
    document.getElementById('confirm').showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

/** The task actions and the states each applies to. */
export const TASK_ACTIONS = {
  run: { label: 'Run', states: ['scheduled', 'retry', 'archived', 'aggregating'], past: 'sent to pending' },
  archive: { label: 'Archive', states: ['pending', 'scheduled', 'retry', 'aggregating', 'waiting'], past: 'archived' },
  delete: { label: 'Delete', states: ['pending', 'scheduled', 'retry', 'archived', 'completed', 'aggregating', 'waiting'], past: 'deleted', danger: true },
  cancel: { label: 'Cancel', states: ['active'], past: 'asked to stop' },
};

/** actionsFor lists the actions a task in state allows (none when read-only). */
export const actionsFor = (state) => (readOnly ? [] : Object.keys(TASK_ACTIONS).filter((a) => TASK_ACTIONS[a].states.includes(state)));

/** taskAction runs one action on one task; true when it was done. */
export async function taskAction(queue, id, action) {
  const a = TASK_ACTIONS[action];
  if (a.danger && !(await confirm(`${a.label} task?`, `Task ${id} of queue ${queue} will be deleted for good.`, a.label))) return false;
  try {
    if (action === 'delete') await call('DELETE', paths.task(queue, id));
    else await call('POST', paths.taskAction(queue, id, action));
    toast(`Task ${id} ${a.past}.`, 'ok');
    return true;
  } catch (err) {
    toast(`${a.label} ${id}: ${err.message}`, 'error');
    return false;
  }
}

/** actionButtons returns the buttons of a task's actions; done runs after one succeeded. */
export function actionButtons(queue, task, done, small = true) {
  return actionsFor(task.state).map((action) =>
    h('button', {
      type: 'button',
      class: `btn ${small ? 'btn-small' : ''} ${TASK_ACTIONS[action].danger ? 'btn-danger-soft' : ''}`,
      dataset: { action, task: task.id },
      text: TASK_ACTIONS[action].label,
      onclick: async (ev) => {
        ev.currentTarget.disabled = true;
        if (await taskAction(queue, task.id, action)) done();
        else ev.currentTarget.disabled = false;
      },
    }));
}

/** setPaused pauses or resumes a queue; true when it was done. */
export async function setPaused(queue, pause) {
  try {
    await call('POST', pause ? paths.pause(queue) : paths.resume(queue));
    toast(`Queue ${queue} ${pause ? 'paused' : 'resumed'}.`, 'ok');
    return true;
  } catch (err) {
    toast(`${pause ? 'Pause' : 'Resume'} ${queue}: ${err.message}`, 'error');
    return false;
  }
}

/** bulkActionsFor lists the actions that apply to every task of a state. */
export const bulkActionsFor = (state) => actionsFor(state);

/**
 * bulk runs action on every task of state in queue (of group, for
 * aggregating tasks) after a confirmation, and returns how many tasks it
 * moved, or null when it was not confirmed or failed.
 *
 * Run, archive and delete are one call, POST /v1/queues/{q}/bulk (the
 * server moves the tasks in atomic batches). Cancel, which has no bulk
 * call, lists the active tasks first, then asks each to stop.
 */
export async function bulk(queue, state, action, count, group) {
  const a = TASK_ACTIONS[action];
  const what = `${count === undefined ? 'every' : `all ${count}`} ${state} task${count === 1 ? '' : 's'} of ${group ? `group ${group} in ` : ''}queue ${queue}`;
  if (!(await confirm(`${a.label} ${state} tasks?`, `This will ${action} ${what}.`, `${a.label} all`))) return null;
  try {
    let n;
    if (action === 'cancel') {
      n = await oneByOne(queue, state, action, group);
    } else {
      const body = { action, state };
      if (group) body.group = group;
      n = (await call('POST', paths.bulk(queue), body)).count;
    }
    toast(`${n} task${n === 1 ? '' : 's'} ${a.past}.`, 'ok');
    return n;
  } catch (err) {
    toast(`${a.label} all ${state}: ${err.message}`, 'error');
    return null;
  }
}

// oneByOne acts on each task of a state, as listed before the first action,
// four at a time; it returns how many it acted on.
async function oneByOne(queue, state, action, group) {
  const ids = [];
  for (let page = 1; page; ) {
    const params = { state, page, page_size: 1000 };
    if (group) params.group = group;
    const res = await call('GET', paths.tasks(queue, params));
    ids.push(...res.tasks.map((t) => t.id));
    page = res.next_page || 0;
  }
  let done = 0;
  const worker = async () => {
    while (ids.length) {
      const id = ids.pop();
      try {
        if (action === 'delete') await call('DELETE', paths.task(queue, id));
        else await call('POST', paths.taskAction(queue, id, action));
        done++;
      } catch { /* moved meanwhile: not counted */ }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return done;
}
