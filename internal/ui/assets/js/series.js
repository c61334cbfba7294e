// Figures over time, sampled by the page from the queue snapshots it
// reads (GET /v1/queues): each queue's size and its processed and failed
// totals. Rates per minute and the charts come from these samples, so
// they cover the time since the dashboard was opened; a queue's charts
// reach further back with the per-minute series the server keeps
// (GET /v1/queues/{q}/series), where it has one.

const KEEP = 600; // samples kept per queue: 20 min at one every 2 s
const MIN_GAP = 1000; // ms between two kept samples
const RATE_WINDOW = 60e3; // rates are averaged over the last minute

const samples = new Map(); // queue name → [{t, size, pending, processed, failed}]
const TOTAL = '\u0000total'; // the sum over all queues, under a name no queue can have

function push(name, sample) {
  let list = samples.get(name);
  if (!list) samples.set(name, (list = []));
  // The last sample stands for "now" until it is MIN_GAP after the one
  // before it; then a new one starts. (Comparing with the last one itself
  // would never let refreshes closer than MIN_GAP add a sample.)
  const before = list[list.length - 2];
  if (before && sample.t - before.t < MIN_GAP) list[list.length - 1] = sample;
  else list.push(sample);
  if (list.length > KEEP) list.splice(0, list.length - KEEP);
}

/** record takes one snapshot of every queue (the answer of GET /v1/queues). */
export function record(queues) {
  const t = Date.now();
  const total = { t, size: 0, pending: 0, processed: 0, failed: 0 };
  for (const q of queues) {
    const st = q.stats || {};
    const one = { t, size: st.size || 0, pending: st.pending || 0, processed: st.processed_total || 0, failed: st.failed_total || 0 };
    push(q.name, one);
    for (const k of ['size', 'pending', 'processed', 'failed']) total[k] += one[k];
  }
  push(TOTAL, total);
}

/** recordOne takes a snapshot of one queue (the answer of GET /v1/queues/{q}). */
export const recordOne = (q) => {
  const st = q.stats || {};
  push(q.name, { t: Date.now(), size: st.size || 0, pending: st.pending || 0, processed: st.processed_total || 0, failed: st.failed_total || 0 });
};

/**
 * rates returns {processed, failed} per minute over about the last
 * minute, or nulls until two samples are far enough apart.
 */
export function rates(name = TOTAL) {
  const list = samples.get(name) || [];
  const last = list[list.length - 1];
  if (!last) return { processed: null, failed: null };
  let first = null;
  for (const smp of list) {
    if (last.t - smp.t <= RATE_WINDOW) { first = smp; break; }
  }
  if (!first || last.t - first.t < 1500) return { processed: null, failed: null };
  const perMin = (a, b) => Math.max(0, ((b - a) * 60e3) / (last.t - first.t));
  return { processed: perMin(first.processed, last.processed), failed: perMin(first.failed, last.failed) };
}

/**
 * chartData returns the series of a queue (or of all queues) for the
 * charts: throughput (processed and failed per minute, between samples)
 * and size (all tasks, pending). server, when given, is the queue's
 * per-minute series (GET /v1/queues/{q}/series): its whole minutes before
 * the page's first sample come first.
 */
export function chartData(name = TOTAL, server = null) {
  const list = samples.get(name) || [];
  const processed = [], failed = [], size = [], pending = [];
  const first = list.length ? list[0].t : Date.now();
  for (const pt of server?.points || []) {
    const t = Date.parse(pt.time);
    if (!(t + 60e3 <= first)) continue; // the page's samples cover it
    const end = t + 60e3; // a minute's counts are known at its end
    const total = ['pending', 'active', 'scheduled', 'retry', 'archived', 'completed', 'aggregating'].reduce((n, k) => n + (pt[k] || 0), 0);
    processed.push([end, pt.processed || 0]);
    failed.push([end, pt.failed || 0]);
    size.push([end, total]);
    pending.push([end, pt.pending || 0]);
  }
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    size.push([c.t, c.size]);
    pending.push([c.t, c.pending]);
    if (i === 0) continue;
    const p = list[i - 1];
    const dt = c.t - p.t;
    processed.push([c.t, Math.max(0, ((c.processed - p.processed) * 60e3) / dt)]);
    failed.push([c.t, Math.max(0, ((c.failed - p.failed) * 60e3) / dt)]);
  }
  return { processed, failed, size, pending };
}
