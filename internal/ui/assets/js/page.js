// What every page shares: a root element, a refresh that loads then
// renders (dropping answers that arrive after a newer one), an error
// banner, and the time the last render took.

import { h } from './dom.js';
import { APIError } from './api.js';

/**
 * page appends a section of class cls to main and returns it with a
 * refresh function: load() fetches, render(data, body) draws into body
 * (head, above it, is for what stays, such as a search box). The
 * time render takes is put in body.dataset.renderMs (the browser test
 * reads it).
 */
export function page(main, cls, load, render) {
  const root = h('section', { class: `view ${cls}` });
  const head = h('div', { class: 'view-top' });
  const banner = h('div', { class: 'banner', role: 'alert', hidden: true });
  const body = h('div', { class: 'view-body' });
  root.append(head, banner, body);
  main.append(root);
  let seq = 0;
  let gone = false;
  async function refresh() {
    const my = ++seq;
    let data;
    try {
      data = await load();
    } catch (err) {
      if (my !== seq || gone) return;
      if (err instanceof APIError && err.status === 401) return; // on the way to the login page
      banner.textContent = `Could not load: ${err.message}`;
      banner.hidden = false;
      return;
    }
    if (my !== seq || gone) return;
    banner.hidden = true;
    const t0 = performance.now();
    render(data, body);
    const t1 = performance.now();
    document.body.dataset.renderMs = (t1 - t0).toFixed(1);
    document.body.dataset.renderedAt = t1.toFixed(1);
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  }
  return { root, head, body, refresh, unmount: () => { gone = true; } };
}

/** header is a page's title row: a breadcrumb or title, badges, and buttons on the right. */
export const header = (title, badges = [], buttons = []) =>
  h('div', { class: 'view-head' }, h('h1', {}, title), h('div', { class: 'head-badges' }, badges), h('div', { class: 'head-actions' }, buttons));

/** waiting is the notice of a part that waits for an API route the server does not have yet. */
export const waiting = (what, route) =>
  h('div', { class: 'notice' }, h('strong', { text: `${what} are not available from this server yet.` }), ' The dashboard shows them once the API serves ', h('code', { text: route }), '.');

/** table makes a table from column heads and rows (arrays of cells). */
export function table(heads, rows, props = {}) {
  return h('div', { class: 'table-wrap' }, h('table', props,
    h('thead', {}, h('tr', {}, heads.map((c) => (typeof c === 'string' ? h('th', { text: c }) : c)))),
    h('tbody', {}, rows)));
}
