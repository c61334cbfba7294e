// How the page stays current: the event stream GET /v1/events, and while
// the stream is down (it broke, the server restarts), polling every 2 s
// and a new try every 5 s. Pages only say what to refresh; this file
// alone decides when.

import { csrf, paths } from './api.js';

const POLL_MS = 2000; // polling period while there is no event stream
const MIN_GAP_MS = 500; // at most two refreshes a second on a busy stream
const IDLE_MS = 10000; // a refresh at least this often, for the charts and relative times
const RETRY_MS = 5000; // reconnect delay after the stream broke

/**
 * startLive calls refresh whenever the data may have changed, one call at
 * a time, and reports the mode ("events" or "polling") through onMode.
 * It returns a function that stops it.
 */
export function startLive(refresh, onMode) {
  let stopped = false;
  let running = false;
  let again = false;
  let last = 0;
  let timer = 0;
  const abort = new AbortController();

  // tick runs refresh now, or right after the one in flight.
  async function tick() {
    if (stopped) return;
    if (running) { again = true; return; }
    const wait = last + MIN_GAP_MS - performance.now();
    if (wait > 0) { clearTimeout(timer); timer = setTimeout(tick, wait); return; }
    running = true;
    last = performance.now();
    try { await refresh(); } catch (err) { console.error('refresh', err); }
    running = false;
    if (again) { again = false; tick(); }
  }

  let pollTimer = 0;
  function poll(ms) {
    clearInterval(pollTimer);
    pollTimer = setInterval(tick, ms);
  }

  async function stream() {
    while (!stopped) {
      let res;
      try {
        res = await fetch(paths.events(), { headers: { 'X-CSRF-Token': csrf, Accept: 'text/event-stream' }, signal: abort.signal });
      } catch {
        res = null;
      }
      if (stopped) return;
      if (res && res.ok && res.body) {
        onMode('events');
        poll(IDLE_MS);
        tick();
        try {
          await readEvents(res.body, () => {
            // How many events came, for the browser test and for a look
            // in the developer tools.
            document.body.dataset.events = String(Number(document.body.dataset.events || 0) + 1);
            tick();
          });
        } catch { /* broken stream: reconnect below */ }
      }
      if (stopped) return;
      onMode('polling');
      poll(POLL_MS);
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }

  stream(); // the page itself loads its first data
  return () => {
    stopped = true;
    abort.abort();
    clearTimeout(timer);
    clearInterval(pollTimer);
  };
}

// readEvents calls onEvent once per server-sent event of body (the format
// of text/event-stream: fields, one per line, an empty line ends an event;
// comments start with a colon and are keep-alives).
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let fields = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (fields > 0) onEvent();
        fields = 0;
      } else if (!line.startsWith(':')) {
        fields++;
      }
    }
  }
}
