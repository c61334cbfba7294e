// A small line chart in inline SVG: a few series over time, a y axis
// from zero to a round maximum, the time span underneath.

import { h, s, num, rate } from './dom.js';

const W = 560, H = 150; // the view box; the SVG scales to its box
const PAD = { l: 44, r: 8, t: 10, b: 20 };

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

const clock = (t) => new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });

/**
 * lineChart draws series [{name, points: [[t, v]…], kind}] under a title;
 * kind picks the series' color class. With fewer than two points it says
 * that it is collecting.
 */
export function lineChart(title, series, { unit = '' } = {}) {
  const all = series.flatMap((sr) => sr.points);
  const box = h('figure', { class: 'chart' },
    h('figcaption', {},
      h('span', { class: 'chart-title', text: title }),
      unit ? h('span', { class: 'chart-unit', text: unit }) : null,
      h('span', { class: 'chart-legend' }, series.map((sr) => {
        const lastPt = sr.points[sr.points.length - 1];
        return h('span', { class: `legend legend-${sr.kind}` },
          h('i', {}), `${sr.name} `, h('b', { text: lastPt ? (unit ? rate(lastPt[1]) : num(Math.round(lastPt[1]))) : '–' }));
      }))));
  if (all.length < 2) {
    box.append(h('div', { class: 'chart-empty', text: 'Collecting samples…' }));
    return box;
  }
  const t0 = Math.min(...all.map((p) => p[0]));
  const t1 = Math.max(...all.map((p) => p[0]));
  const max = niceMax(Math.max(...all.map((p) => p[1])));
  const x = (t) => PAD.l + ((t - t0) / Math.max(1, t1 - t0)) * (W - PAD.l - PAD.r);
  const y = (v) => H - PAD.b - (v / max) * (H - PAD.t - PAD.b);
  const grid = [0, 0.5, 1].map((f) => {
    const v = max * f;
    return [
      s('line', { class: 'grid', x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v) }),
      s('text', { class: 'axis', x: PAD.l - 6, y: y(v) + 4, 'text-anchor': 'end', text: num(v) }),
    ];
  });
  const lines = series.filter((sr) => sr.points.length > 1).map((sr) => {
    const d = sr.points.map((p, i) => `${i ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join('');
    const area = `${d}L${x(sr.points[sr.points.length - 1][0]).toFixed(1)},${y(0)}L${x(sr.points[0][0]).toFixed(1)},${y(0)}Z`;
    return [s('path', { class: `area area-${sr.kind}`, d: area }), s('path', { class: `line line-${sr.kind}`, d })];
  });
  box.append(s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title },
    grid, lines,
    s('text', { class: 'axis', x: PAD.l, y: H - 4, text: clock(t0) }),
    s('text', { class: 'axis', x: W - PAD.r, y: H - 4, 'text-anchor': 'end', text: clock(t1) })));
  return box;
}

/** queueCharts draws the throughput and the size of chartData's series (series.js). */
export const queueCharts = (cd) => [
  lineChart('Throughput', [
    { name: 'processed', points: cd.processed, kind: 'ok' },
    { name: 'failed', points: cd.failed, kind: 'bad' }], { unit: 'tasks/min' }),
  lineChart('Queue size', [
    { name: 'all tasks', points: cd.size, kind: 'size' },
    { name: 'pending', points: cd.pending, kind: 'pending' }]),
];

/**
 * barChart draws the processed and failed attempts of each day
 * ([{date, processed, failed}], newest first, as GET
 * /v1/queues/{q}/history answers), oldest on the left.
 */
export function barChart(title, days) {
  const W = 1160; // it spans the page's width
  const list = [...days].reverse();
  const max = niceMax(Math.max(...list.map((d) => d.processed || 0)));
  const slot = (W - PAD.l - PAD.r) / list.length;
  const y = (v) => H - PAD.b - (v / max) * (H - PAD.t - PAD.b);
  const sum = (k) => list.reduce((n, d) => n + (d[k] || 0), 0);
  return h('figure', { class: 'chart', id: 'history-chart' },
    h('figcaption', {},
      h('span', { class: 'chart-title', text: title }),
      h('span', { class: 'chart-unit', text: 'attempts per day' }),
      h('span', { class: 'chart-legend' },
        h('span', { class: 'legend legend-ok' }, h('i', {}), 'processed ', h('b', { text: num(sum('processed')) })),
        h('span', { class: 'legend legend-bad' }, h('i', {}), 'failed ', h('b', { text: num(sum('failed')) })))),
    s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title },
      [0, 0.5, 1].map((f) => [
        s('line', { class: 'grid', x1: PAD.l, x2: W - PAD.r, y1: y(max * f), y2: y(max * f) }),
        s('text', { class: 'axis', x: PAD.l - 6, y: y(max * f) + 4, 'text-anchor': 'end', text: num(max * f) })]),
      list.map((d, i) => {
        const x = PAD.l + i * slot + slot * 0.15;
        const w = slot * 0.7;
        return [
          s('rect', { class: 'bar bar-ok', x, width: w, y: y(d.processed || 0), height: y(0) - y(d.processed || 0) }, s('title', { text: `${d.date}: ${num(d.processed)} processed, ${num(d.failed)} failed` })),
          s('rect', { class: 'bar bar-bad', x, width: w, y: y(d.failed || 0), height: y(0) - y(d.failed || 0) }),
          i % Math.ceil(list.length / 14) === 0 ? s('text', { class: 'axis', x: x + w / 2, y: H - 4, 'text-anchor': 'middle', text: d.date.slice(5) }) : null,
        ];
      })));
}
