// DOM building and formatting. Every text goes in through textContent or
// an attribute, never as HTML, so no task payload can inject markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** h('a', {href, class, onclick}, ...children) makes an HTML element. */
export function h(tag, props, ...children) {
  return build(document.createElement(tag), props, children);
}

/** fill replaces the children of el (arrays are flattened; null, undefined and false are left out). */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** s('path', {d}) makes an SVG element. */
export function s(tag, props, ...children) {
  return build(document.createElementNS(SVG_NS, tag), props, children);
}

const numFmt = new Intl.NumberFormat('en-US');
const rateFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

/** num formats a count: 12,345. */
export const num = (n) => (n === undefined || n === null ? '–' : numFmt.format(n));

/** rate formats a per-minute rate, or a dash while it is unknown. */
export const rate = (r) => (r === null || r === undefined ? '–' : r >= 10 ? numFmt.format(Math.round(r)) : rateFmt.format(r));

/** bytes formats a size: 1.2 MB. */
export function bytes(n) {
  if (n === undefined || n === null || n < 0) return '–';
  if (!n) return '0 B';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${rateFmt.format(n)} ${units[i]}`;
}

/** dur formats milliseconds: 850 ms, 12 s, 3 min, 2 h, 4 d. */
export function dur(ms) {
  if (ms === undefined || ms === null) return '–';
  const a = Math.abs(ms);
  if (a < 10) return `${rateFmt.format(ms)} ms`;
  if (a < 1000) return `${Math.round(ms)} ms`;
  if (a < 60e3) return `${rateFmt.format(ms / 1e3)} s`;
  if (a < 3600e3) return `${Math.round(ms / 60e3)} min`;
  if (a < 86400e3) return `${rateFmt.format(ms / 3600e3)} h`;
  return `${rateFmt.format(ms / 86400e3)} d`;
}

/** when shows a time relative to now ("in 5 min", "3 s ago"), with the exact time as its title. */
export function when(iso) {
  if (!iso) return h('span', { class: 'muted', text: '–' });
  const t = new Date(iso);
  const d = t.getTime() - Date.now();
  const text = Math.abs(d) < 1000 ? 'now' : d > 0 ? `in ${dur(d)}` : `${dur(-d)} ago`;
  return h('time', { datetime: iso, title: t.toLocaleString(), text });
}

/** clip shortens a text for a table cell. */
export const clip = (text, n = 60) => (text && text.length > n ? text.slice(0, n - 1) + '…' : text || '');

/** badge is a small colored label: a task state, a queue mode, "paused". */
export const badge = (text, kind = text) => h('span', { class: `badge badge-${kind}`, text });

/** link is an in-app link (the router takes the click). */
export const link = (href, text, props = {}) => h('a', { href, ...props }, text);

/** card is one figure of a summary row. */
export const card = (label, value, props = {}) =>
  h('div', { class: 'card', ...props }, h('div', { class: 'card-value', text: value }), h('div', { class: 'card-label', text: label }));
