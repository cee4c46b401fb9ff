// The openclaw-host dashboard: polls dashboard/data and draws it. Every field of the data is
// optional to this script (a run that serves only, or trains only, or just started, leaves
// parts empty), and everything from the data is inserted as text, never as markup.
'use strict';

(function () {
  const SVG = 'http://www.w3.org/2000/svg';
  const POLL_MS = 2000;

  // The learning charts always shown, in this order, even before their first point.
  const LEARNING = [
    ['train/reward', 'Reward (preference share or solve rate)'],
    ['train/loss', 'Loss'],
    ['train/kl', 'KL divergence'],
    ['train/staleness', 'Staleness (weight versions)'],
    ['train/logprob_diff', '|train − rollout logprob|'],
  ];
  const RATES = [
    ['rate/requests_per_s', 'Requests per second'],
    ['rate/tokens_per_s', 'Generated tokens per second'],
    ['rate/prompt_tokens_per_s', 'Prompt tokens per second'],
    ['rate/samples_per_s', 'Trained samples per second'],
    ['rate/steps_per_s', 'Training steps per second'],
  ];
  const VOTE_ORDER = ['+1', '0', '-1', 'unparseable'];

  // --- Reading the data defensively ---

  function isObj(x) {
    return x !== null && typeof x === 'object' && !Array.isArray(x);
  }
  function obj(x) {
    return isObj(x) ? x : {};
  }
  function arr(x) {
    return Array.isArray(x) ? x : [];
  }
  function num(x) {
    return typeof x === 'number' && isFinite(x) ? x : null;
  }
  function str(x) {
    if (typeof x === 'string') return x;
    if (typeof x === 'number' || typeof x === 'boolean') return String(x);
    return '';
  }
  // A labelled metric as [label, number] pairs; a bare number becomes one unnamed entry.
  function entries(x) {
    if (num(x) !== null) return [['', x]];
    return Object.keys(obj(x))
      .map((k) => [k, num(x[k])])
      .filter((e) => e[1] !== null);
  }
  function total(x) {
    return entries(x).reduce((s, e) => s + e[1], 0);
  }

  // --- Formatting ---

  function fmt(v) {
    if (v === null || v === undefined) return '–';
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(2);
    if (Number.isInteger(v)) return v.toLocaleString('en-US');
    return String(Number(a >= 1000 ? v.toFixed(1) : v.toPrecision(4)));
  }
  function fmtBytes(v) {
    if (v === null) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i += 1;
    }
    return (i === 0 ? String(v) : v.toFixed(1)) + ' ' + units[i];
  }
  function pad2(n) {
    return n < 10 ? '0' + n : String(n);
  }
  function fmtClock(t) {
    if (t === null) return '–';
    const d = new Date(t * 1000);
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }
  function fmtDateTime(t) {
    if (t === null) return '–';
    const d = new Date(t * 1000);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + fmtClock(t);
  }
  function fmtShare(part, whole) {
    return whole > 0 ? (100 * part / whole).toFixed(1) + ' %' : '–';
  }

  // --- DOM helpers ---

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k of Object.keys(attrs)) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function card(title, extra) {
    const c = el('div', 'card');
    const head = el('div', 'card-head');
    head.appendChild(el('h3', '', title));
    if (extra) head.appendChild(extra);
    c.appendChild(head);
    return c;
  }
  function bar(fraction, bad) {
    const b = el('div', bad ? 'bar bad' : 'bar');
    const fill = el('div');
    fill.style.width = (Math.max(0, Math.min(1, fraction)) * 100).toFixed(1) + '%';
    b.appendChild(fill);
    return b;
  }
  // A table of rows of cells; a cell is text, a number (right-aligned) or an element.
  function table(headers, rows) {
    const t = el('table');
    const head = el('tr');
    headers.forEach((h) => head.appendChild(el('th', h.num ? 'num' : '', h.text)));
    t.appendChild(el('thead')).appendChild(head);
    const body = el('tbody');
    for (const row of rows) {
      const tr = el('tr');
      for (const cell of row) {
        if (cell === null || cell === undefined) {
          tr.appendChild(el('td', 'num', '–'));
        } else if (cell instanceof Node) {
          const td = el('td');
          td.appendChild(cell);
          tr.appendChild(td);
        } else if (typeof cell === 'number') {
          tr.appendChild(el('td', 'num', fmt(cell)));
        } else if (isObj(cell)) {
          tr.appendChild(el('td', cell.cls || '', str(cell.text)));
        } else {
          tr.appendChild(el('td', '', str(cell)));
        }
      }
      body.appendChild(tr);
    }
    t.appendChild(body);
    return t;
  }

  // --- Charts ---

  // [[step, value, time], ...] as {x, y} with x the step (or the time), finite points only.
  function points(raw, byTime) {
    const out = [];
    for (const p of arr(raw)) {
      if (!Array.isArray(p)) continue;
      const x = num(byTime ? p[2] : p[0]);
      const y = num(p[1]);
      if (x !== null && y !== null) out.push({ x: x, y: y });
    }
    return out;
  }

  function chart(tag, title, raw, byTime) {
    const pts = points(raw, byTime);
    const last = pts.length ? pts[pts.length - 1].y : null;
    const c = card(title, el('span', 'last', last === null ? '' : fmt(last)));
    const W = 360, H = 160, L = 58, R = 12, T = 10, B = 24;
    const svg = svgEl('svg', {
      class: 'chart',
      viewBox: '0 0 ' + W + ' ' + H,
      role: 'img',
      'aria-label': title,
      'data-tag': tag,
      'data-points': pts.length,
    });
    svg.appendChild(svgEl('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }));
    svg.appendChild(svgEl('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }));
    if (pts.length === 0) {
      svg.appendChild(svgEl('text', {
        class: 'none', x: (L + W - R) / 2, y: (T + H - B) / 2, 'text-anchor': 'middle',
      }, 'no data yet'));
    } else {
      let xmin = pts[0].x, xmax = pts[0].x, ymin = pts[0].y, ymax = pts[0].y;
      for (const p of pts) {
        if (p.x < xmin) xmin = p.x;
        if (p.x > xmax) xmax = p.x;
        if (p.y < ymin) ymin = p.y;
        if (p.y > ymax) ymax = p.y;
      }
      // A flat series is drawn across the middle instead of dividing by zero.
      const ylo = ymin === ymax ? ymin - (Math.abs(ymin) || 1) : ymin;
      const yhi = ymin === ymax ? ymax + (Math.abs(ymax) || 1) : ymax;
      const xspan = xmax - xmin;
      const sx = (x) => L + (xspan > 0 ? (x - xmin) / xspan : 0.5) * (W - L - R);
      const sy = (y) => H - B - ((y - ylo) / (yhi - ylo)) * (H - T - B);
      svg.appendChild(svgEl('line', {
        class: 'grid-line', x1: L, y1: sy(ymax), x2: W - R, y2: sy(ymax),
      }));
      const coords = pts.map((p) => sx(p.x).toFixed(1) + ',' + sy(p.y).toFixed(1));
      if (pts.length > 1) {
        // Filled down to zero where zero is on the chart, so a series at zero has no area.
        const base = (ylo <= 0 && yhi >= 0 ? sy(0) : H - B).toFixed(1);
        const area = sx(pts[0].x).toFixed(1) + ',' + base + ' ' + coords.join(' ') + ' ' +
          sx(pts[pts.length - 1].x).toFixed(1) + ',' + base;
        svg.appendChild(svgEl('polygon', { class: 'area', points: area }));
      }
      svg.appendChild(svgEl('polyline', { class: 'line', points: coords.join(' ') }));
      const end = pts[pts.length - 1];
      svg.appendChild(svgEl('circle', { class: 'dot', cx: sx(end.x), cy: sy(end.y), r: 3 }));
      svg.appendChild(svgEl('text', { x: L - 6, y: sy(ymax) + 4, 'text-anchor': 'end' }, fmt(ymax)));
      if (ymin !== ymax) {
        svg.appendChild(svgEl('text', { x: L - 6, y: sy(ymin) + 4, 'text-anchor': 'end' }, fmt(ymin)));
      }
      const xl = byTime ? fmtClock(xmin) : 'step ' + fmt(xmin);
      const xr = byTime ? fmtClock(xmax) : 'step ' + fmt(xmax);
      if (xmax !== xmin) {
        svg.appendChild(svgEl('text', { x: L, y: H - 6, 'text-anchor': 'start' }, xl));
        svg.appendChild(svgEl('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, xr));
      } else {
        svg.appendChild(svgEl('text', { x: sx(xmin), y: H - 6, 'text-anchor': 'middle' }, xl));
      }
    }
    c.appendChild(svg);
    c.appendChild(el('div', 'tag', tag + ' · ' + pts.length + (pts.length === 1 ? ' point' : ' points')));
    return c;
  }

  function titleOf(tag) {
    const slash = tag.indexOf('/');
    const name = (slash >= 0 ? tag.slice(slash + 1) : tag).replace(/_/g, ' ');
    const group = slash >= 0 ? tag.slice(0, slash) : '';
    const pretty = name.charAt(0).toUpperCase() + name.slice(1);
    return group === 'eval' ? 'Eval: ' + pretty : pretty;
  }

  // --- Sections ---

  function renderSummary(d) {
    const g = obj(d.gauges), c = obj(d.counters);
    const cps = arr(d.checkpoints);
    const lastCp = cps.length ? num(obj(cps[cps.length - 1]).step) : null;
    const tiles = [
      ['Weight version', fmt(num(g.weight_version))],
      ['Training steps', fmt(num(c.train_steps))],
      ['Trained samples', fmt(num(c.trained_samples))],
      // The loss gauge reads 0 until the first step; that is no loss.
      ['Last loss', num(c.train_steps) ? fmt(num(g.train_loss)) : '–'],
      ['Requests in flight', fmt(num(g.inflight_requests))],
      ['Last checkpoint', lastCp === null ? '–' : 'step ' + fmt(lastCp)],
    ];
    const failing = num(g.train_failed_in_a_row);
    if (failing !== null && failing > 0) tiles.push(['Failed steps in a row', fmt(failing)]);
    const box = document.getElementById('summary');
    box.replaceChildren(...tiles.map((t) => {
      const tile = el('div', 'tile');
      tile.appendChild(el('div', 'label', t[0]));
      tile.appendChild(el('div', 'value', t[1]));
      return tile;
    }));
  }

  function renderLearning(d) {
    const series = obj(d.series);
    const fixed = LEARNING.map((e) => e[0]);
    const tags = Object.keys(series).filter((t) => fixed.indexOf(t) < 0 && !t.startsWith('rate/'));
    const rank = (t) => (t.startsWith('train/') ? 0 : t.startsWith('eval/') ? 1 : 2);
    tags.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
    // The five curves first; every other series (the training log's and the scoreboard's
    // numbers) in a section of its own at the end, so the judges and queues stay in view.
    document.getElementById('learning')
      .replaceChildren(...LEARNING.map((e) => chart(e[0], e[1], series[e[0]], false)));
    document.getElementById('more')
      .replaceChildren(...tags.map((t) => chart(t, titleOf(t), series[t], false)));
  }

  function countsCard(title, data, labelName, order, bad) {
    const rows = entries(data);
    if (order) {
      const pos = (k) => (order.indexOf(k) >= 0 ? order.indexOf(k) : order.length);
      rows.sort((a, b) => pos(a[0]) - pos(b[0]) || (a[0] < b[0] ? -1 : 1));
    } else {
      rows.sort((a, b) => b[1] - a[1]);
    }
    const sum = rows.reduce((s, e) => s + e[1], 0);
    const c = card(title, el('span', 'last', fmt(sum)));
    if (!rows.length) {
      c.appendChild(el('p', 'empty', 'none yet'));
      return c;
    }
    c.appendChild(table(
      [{ text: labelName }, { text: 'count', num: true }, { text: 'share', num: true }, { text: '' }],
      rows.map((r) => [r[0] || '(all)', r[1], { cls: 'num', text: fmtShare(r[1], sum) },
        bar(sum > 0 ? r[1] / sum : 0, bad)]),
    ));
    return c;
  }

  function renderJudges(d) {
    const c = obj(d.counters), h = obj(d.histograms);
    const cards = [
      countsCard('Outcome votes', c.judge_votes, 'vote', VOTE_ORDER, false),
      countsCard('Judge failures by reason', c.judge_failures, 'reason', null, true),
      countsCard('Turns judged by outcome', c.judged, 'outcome', null, false),
    ];
    const js = obj(h.judge_seconds);
    const n = num(js.count), s = num(js.sum);
    const latency = card('Judge latency per turn');
    latency.appendChild(table(
      [{ text: '' }, { text: '', num: true }],
      [
        ['turns', n],
        ['mean', { cls: 'num', text: n ? fmt(s / n) + ' s' : '–' }],
        ['with a next state', num(obj(c.judged_turns).yes)],
        ['without', num(obj(c.judged_turns).no)],
      ],
    ));
    cards.push(latency);
    document.getElementById('judges').replaceChildren(...cards);
  }

  function renderQueues(d) {
    const g = obj(d.gauges), c = obj(d.counters);
    const depths = entries(g.queue_depth).sort((a, b) => (a[0] < b[0] ? -1 : 1));
    const most = depths.reduce((m, e) => Math.max(m, e[1]), 0);
    const dc = card('Queue depths', el('span', 'last', fmt(total(g.queue_depth))));
    if (depths.length) {
      dc.appendChild(table(
        [{ text: 'queue' }, { text: 'waiting', num: true }, { text: '' }],
        depths.map((e) => [e[0] || '(all)', e[1], bar(most > 0 ? e[1] / most : 0, false)]),
      ));
    } else {
      dc.appendChild(el('p', 'empty', 'no queue reported yet'));
    }
    const dropped = card('Dropped and turned away');
    const rows = entries(c.queue_overflow).map((e) => ['overflow: ' + (e[0] || '(all)'), e[1]]);
    rows.push(['stale samples dropped', num(c.stale_dropped)]);
    for (const e of entries(c.plugin_calls_abandoned)) rows.push(['abandoned plugin call: ' + e[0], e[1]]);
    dropped.appendChild(table([{ text: 'what' }, { text: 'count', num: true }], rows));
    const serving = card('Serving now');
    serving.appendChild(table(
      [{ text: '' }, { text: '', num: true }],
      [
        ['requests in flight', num(g.inflight_requests)],
        ['weight version', num(g.weight_version)],
        ['prefix cache', { cls: 'num', text: fmtBytes(num(g.prefix_cache_bytes)) }],
      ],
    ));
    document.getElementById('queues').replaceChildren(dc, dropped, serving);
  }

  function renderThroughput(d) {
    const rates = obj(d.rates), c = obj(d.counters), h = obj(d.histograms);
    const known = RATES.map((e) => e[0]);
    const others = Object.keys(rates).filter((t) => known.indexOf(t) < 0).sort();
    const cards = RATES.map((e) => chart(e[0], e[1], rates[e[0]], true))
      .concat(others.map((t) => chart(t, titleOf(t), rates[t], true)));
    // Requests are labelled endpoint/status; shown by both.
    const byStatus = {};
    for (const e of entries(c.requests)) {
      const parts = e[0].split('/');
      const key = parts.length > 1 ? parts.slice(0, -1).join('/') + ' → ' + parts[parts.length - 1] : e[0];
      byStatus[key] = (byStatus[key] || 0) + e[1];
    }
    cards.push(countsCard('Requests by endpoint and status', byStatus, 'endpoint → status', null, false));
    const rs = obj(h.request_seconds), tt = obj(h.ttft_seconds);
    const mean = (x) => (num(x.count) ? fmt(num(x.sum) / num(x.count)) + ' s' : '–');
    const totals = card('Totals');
    totals.appendChild(table(
      [{ text: '' }, { text: '', num: true }],
      [
        ['generated tokens', num(c.generated_tokens)],
        ['prompt tokens', num(c.prompt_tokens)],
        ['prompt tokens from the prefix cache', num(c.prefix_reused_tokens)],
        ['mean request time', { cls: 'num', text: mean(rs) }],
        ['mean time to first token', { cls: 'num', text: mean(tt) }],
      ],
    ));
    cards.push(totals);
    document.getElementById('throughput').replaceChildren(...cards);
  }

  function renderCheckpoints(d) {
    const rows = arr(d.checkpoints).filter(isObj).slice().reverse();
    const box = document.getElementById('checkpoints');
    if (!rows.length) {
      box.replaceChildren(el('p', 'empty', 'no checkpoint written yet'));
      return;
    }
    const wrap = el('div', 'scroll');
    wrap.appendChild(table(
      [{ text: 'step', num: true }, { text: 'path' }, { text: 'written' }],
      rows.map((r) => [num(r.step), { cls: 'path', text: str(r.path) }, fmtDateTime(num(r.time))]),
    ));
    box.replaceChildren(wrap);
  }

  // Episodes are redrawn only when they change, and transcripts opened stay open.
  let episodesShown = null;
  const openTranscripts = new Set();

  function renderEpisodes(d) {
    const list = arr(d.episodes).filter(isObj);
    const signature = JSON.stringify(list);
    if (signature === episodesShown) return;
    episodesShown = signature;
    const box = document.getElementById('episodes');
    if (!list.length) {
      box.replaceChildren(el('p', 'empty', 'no episode finished yet'));
      return;
    }
    box.replaceChildren(...list.map((e) => {
      const solved = e.solved === true;
      const a = el('article', 'episode ' + (solved ? 'solved' : 'unsolved'));
      const head = el('div', 'episode-head');
      head.appendChild(el('span', 'pill ' + (solved ? 'good' : 'bad'), solved ? '✓ solved' : '✗ not solved'));
      head.appendChild(el('span', 'task', str(e.task) || '(unnamed task)'));
      head.appendChild(el('span', 'meta', 'reward ' + fmt(num(e.reward))));
      head.appendChild(el('span', 'meta', 'step ' + fmt(num(e.step))));
      a.appendChild(head);
      const text = str(e.transcript);
      const key = str(e.step) + '\u0000' + str(e.task) + '\u0000' + text.length;
      const details = el('details');
      details.open = openTranscripts.has(key);
      details.appendChild(el('summary', '', 'Transcript (' + text.length.toLocaleString('en-US') + ' characters)'));
      details.appendChild(el('pre', 'transcript', text));
      details.addEventListener('toggle', () => {
        if (details.open) openTranscripts.add(key);
        else openTranscripts.delete(key);
      });
      a.appendChild(details);
      return a;
    }));
  }

  // --- Polling ---

  function setStatus(text, error) {
    const s = document.getElementById('status');
    s.textContent = text;
    s.className = error ? 'status error' : 'status';
  }

  function render(d) {
    const data = obj(d);
    renderSummary(data);
    renderLearning(data);
    renderJudges(data);
    renderQueues(data);
    renderThroughput(data);
    renderCheckpoints(data);
    renderEpisodes(data);
    const now = num(data.now);
    setStatus('Updated ' + fmtClock(Date.now() / 1000) +
      (now === null ? '' : ' · server time ' + fmtClock(now)) + ' · every ' + POLL_MS / 1000 + ' s', false);
  }

  // Relative to the page (a proxy may mount it under a prefix), without the user and
  // password a page opened as http://user:key@host/dashboard carries: fetch refuses such a URL,
  // and the browser sends the credentials it was given for the page by itself.
  function dataUrl() {
    const u = new URL('dashboard/data', window.location.href);
    u.username = '';
    u.password = '';
    return u.href;
  }

  async function poll() {
    // A hidden tab asks for nothing; it catches up on its next poll once shown.
    if (document.hidden) {
      setTimeout(poll, POLL_MS);
      return;
    }
    try {
      const r = await fetch(dataUrl(), { cache: 'no-store', credentials: 'same-origin' });
      if (!r.ok) throw new Error('HTTP ' + r.status + (r.statusText ? ' ' + r.statusText : ''));
      render(await r.json());
    } catch (e) {
      const why = e && e.message ? e.message : String(e);
      setStatus('Could not load the data at ' + fmtClock(Date.now() / 1000) + ': ' + why, true);
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  render({});
  setStatus('Waiting for the first data…', false);
  poll();
})();
