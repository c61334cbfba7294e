// What every page shares: a root element, a refresh that loads then
// renders (dropping answers that arrive after a newer one), an error
// banner, the time the last render took, and the parts of a page that
// are rebuilt only when what they show changed: a refresh every 2 s must
// not replace the button under the user's pointer, nor lose a click.

import { h, fill } from './dom.js';
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

/** table makes a table from column heads and rows (arrays of cells); its tbody is table.tbody. */
export function table(heads, body, props = {}) {
  const tbody = h('tbody', {}, body);
  const el = h('div', { class: 'table-wrap' }, h('table', props,
    heads.length ? h('thead', {}, h('tr', {}, heads.map((c) => (typeof c === 'string' ? h('th', { text: c }) : c)))) : null,
    tbody));
  el.tbody = tbody;
  return el;
}

/**
 * part returns an element whose content update(sig, build) rebuilds only
 * when sig (any JSON value: what the content shows) differs from the
 * last one.
 */
export function part(tag = 'div', props = {}) {
  const el = h(tag, props);
  let last = null;
  el.update = (sig, build) => {
    const s = JSON.stringify(sig);
    if (s === last) return;
    last = s;
    fill(el, build());
  };
  return el;
}

const sigs = new WeakMap(); // row → the shape it was built for

/**
 * rows makes the children of parent one element per item, in order:
 * key(item) names an item's element, shape(item) what its structure
 * depends on (its buttons, its links). An element whose item kept its
 * shape stays, and only its figures change: build(item) may give the
 * element a set(item) method, which is called on every refresh.
 */
export function rows(parent, items, key, shape, build) {
  const old = new Map();
  for (const el of parent.children) old.set(el.dataset.key, el);
  let i = 0;
  for (const it of items) {
    const k = String(key(it));
    const sg = JSON.stringify(shape(it));
    let el = old.get(k);
    old.delete(k);
    if (!el || sigs.get(el) !== sg) {
      const fresh = build(it);
      fresh.dataset.key = k;
      sigs.set(fresh, sg);
      if (el) el.replaceWith(fresh);
      el = fresh;
    }
    el.set?.(it);
    const at = parent.children[i];
    if (at !== el) parent.insertBefore(el, at || null);
    i++;
  }
  for (const el of old.values()) el.remove();
}

/** clockTick changes every 15 s: in a signature, it lets relative times ("3 min ago") age. */
export const clockTick = () => Math.floor(Date.now() / 15000);
