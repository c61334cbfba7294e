// A workflow: its state, and each task with its state, outcome,
// dependencies and last error, linked to the task's own page; the cancel
// of the whole workflow.

import { call, paths, readOnly, APIError } from '../api.js';
import { h, badge, link, when, clip } from '../dom.js';
import { page, table, part, clockTick } from '../page.js';
import { confirm, toast } from '../actions.js';

export function mount(main, { id }) {
  const load = () => call('GET', paths.workflow(id)).catch((err) => {
    if (err instanceof APIError && err.status === 404) return { gone: true, message: err.message };
    throw err;
  });
  const headPart = part();
  const summary = part();
  const tasks = part();
  const p = page(main, 'workflow', load, (wf, body) => {
    if (!body.firstChild) body.append(headPart, summary, tasks);
    headPart.update([wf.gone, wf.state], () => h('div', { class: 'view-head' },
      h('h1', {}, link('/ui/', 'Queues', { class: 'crumb' }), ' / workflow ', h('span', { class: 'mono', text: id })),
      h('div', { class: 'head-badges' }, wf.gone ? null : badge(wf.state, stateKind(wf.state))),
      h('div', { class: 'head-actions' }, wf.gone || readOnly || wf.state !== 'running' ? null : h('button', {
        type: 'button', class: 'btn btn-danger-soft', id: 'cancel-workflow', text: 'Cancel workflow',
        onclick: async (ev) => {
          const btn = ev.currentTarget;
          if (!(await confirm('Cancel workflow?', `Every task of workflow ${id} that has not finished will be canceled.`, 'Cancel workflow'))) return;
          btn.disabled = true;
          try {
            const r = await call('POST', paths.workflowCancel(id));
            toast(`Workflow ${id} canceled: ${r.canceled} task${r.canceled === 1 ? '' : 's'} archived.`, 'ok');
          } catch (err) {
            toast(`Cancel ${id}: ${err.message}`, 'error');
          }
          p.refresh();
        },
      }))));
    if (wf.gone) {
      summary.update('gone', () => h('p', { class: 'empty', text: 'No such workflow: it never existed, or its record was deleted after its retention.' }));
      tasks.update(null, () => null);
      return;
    }
    const count = (o) => wf.tasks.filter((t) => t.outcome === o).length;
    summary.update([wf.state, wf.finished_at, wf.tasks.map((t) => t.outcome || ''), clockTick()], () => h('p', { class: 'muted', id: 'workflow-summary' },
      `${wf.tasks.length} tasks: ${count('succeeded')} succeeded, ${count('failed')} failed, ${count('canceled')} canceled, ` +
      `${count('deleted')} deleted, ${wf.tasks.filter((t) => !t.outcome).length} not finished. Created `, when(wf.created_at),
      wf.finished_at ? ', finished ' : '', wf.finished_at ? when(wf.finished_at) : '', '.'));
    tasks.update([wf.tasks, clockTick()], () => table(['Task', 'Queue', 'State', 'Outcome', 'Depends on', 'Finished', 'Last error'],
      wf.tasks.map((t) => h('tr', { dataset: { task: t.id } },
        h('td', {}, t.state ? link(`/ui/queues/${encodeURIComponent(t.queue)}/tasks/${encodeURIComponent(t.task_id)}`, t.id, { class: 'mono' }) : h('span', { class: 'mono', text: t.id })),
        h('td', {}, link(`/ui/queues/${encodeURIComponent(t.queue)}`, t.queue)),
        h('td', {}, t.state ? badge(t.state) : h('span', { class: 'muted', text: 'gone' })),
        h('td', { class: 'outcome' }, t.outcome ? badge(t.outcome, outcomeKind(t.outcome)) : ''),
        h('td', { class: 'mono' }, (t.depends_on || []).map((d) => (d.on_failure === 'run' ? `${d.id} (run)` : d.id)).join(', ')),
        h('td', {}, t.finished_at ? when(t.finished_at) : ''),
        h('td', { class: 'mono', title: t.last_error || '' }, clip(t.last_error, 80)))), { id: 'workflow-tasks' }));
  });
  return p;
}

const stateKind = (s) => ({ succeeded: 'ok', failed: 'bad', canceled: 'warn' }[s] || s);
const outcomeKind = (o) => ({ succeeded: 'ok', failed: 'bad', canceled: 'warn', deleted: 'warn' }[o] || o);
