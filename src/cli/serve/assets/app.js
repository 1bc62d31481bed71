// The sopsim viewer. Three views over the same Elysia frontend payloads that a run
// writes to events.jsonl: a live run (server-sent events), a finished run (replayed
// with a speed and a slider that steps a turn, or a simultaneous round, at a time) and
// a benchmark (tables, plots, every run). A simultaneous round is one block: its
// messages arrive together, between the round's start and end statuses.
// Model text is only ever inserted with textContent, never parsed as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function roleColour(role) {
  let h = 0;
  for (const c of String(role)) h = (h * 31 + c.codePointAt(0)) % 360;
  return `hsl(${h}, 55%, 38%)`;
}

async function getJson(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
}

async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body || {}),
  });
  return r.json().catch(() => ({}));
}

// ---- the transcript -------------------------------------------------------------

const view = {
  visits: new Map(), // "state#visit" -> section element
  visited: new Map(), // state -> how many times the run entered it
  seen: [], // states in the order the run first entered them
  moves: new Set(), // "from\u0000to": transitions the run made
  speakers: new Map(), // name -> roles seen, for a run whose scenario the page lacks
  current: null,
  streaming: null, // { name, node } while a reply streams in
  scenario: null,
  messages: 0,
  round: null, // the block of the simultaneous round in progress
  network: null, // the populations' networks (network.json), for a population run
  shares: new Map(), // round -> { choice -> how many chose it }
  world: new Map(), // round -> { variable -> value (a per-agent one's mean) }
  lastChoice: new Map(), // member -> its latest decision
  viewer: null, // the member whose view the transcript shows, or null for everyone
};

function section(state, visit) {
  const key = `${state}#${visit}`;
  let s = view.visits.get(key);
  if (!s) {
    s = el('section', 'visit');
    s.dataset.state = state;
    s.dataset.visit = visit;
    s.append(el('h3', null, `${state} · visit ${visit}`));
    $('transcript').append(s);
    view.visits.set(key, s);
  }
  return s;
}

function enterState(state, visit) {
  if (view.current !== null && view.current !== state) view.moves.add(`${view.current}\u0000${state}`);
  if (!view.visited.has(state)) view.seen.push(state);
  view.visited.set(state, (view.visited.get(state) || 0) + 1);
  view.current = state;
  section(state, visit);
  drawGraph();
}

function lastSection() {
  const all = $('transcript').querySelectorAll('.visit');
  return all.length ? all[all.length - 1] : $('transcript');
}

// Where the next line goes: into the round in progress, if any.
function here() {
  return view.round || lastSection();
}

// A round's start (a new block) or end (the block is complete).
function roundStatus(text, meta) {
  if (meta.event === 'round_start') {
    const block = el('div', 'round');
    block.dataset.round = meta.round;
    block.append(el('div', 'round-head', `Round ${meta.round} · ${(meta.roles || []).join(', ')} at once`));
    section(meta.state, meta.visit || 1).append(block);
    view.round = block;
  } else {
    if (view.round) view.round.classList.add('done');
    view.round = null;
  }
}

function addMessage(text, meta) {
  dropStreaming();
  const box = el('div', 'msg');
  box.style.setProperty('--role', roleColour(meta.role));
  box.dataset.name = meta.name || '';
  box.dataset.role = meta.role || '';
  box.dataset.kind = meta.kind || '';
  const who = el('div', 'speaker', meta.name || '');
  who.append(el('span', 'role', ` (${meta.role || ''})`));
  if (meta.decision && meta.decision.value !== undefined) {
    who.append(el('span', 'decision', `chose ${meta.decision.value}`));
  }
  box.append(who, el('div', 'text', text));
  if (meta.name) {
    const roles = view.speakers.get(meta.name) || new Set();
    const known = roles.size;
    if (meta.role) roles.add(meta.role);
    if (!view.speakers.has(meta.name) || roles.size !== known) {
      view.speakers.set(meta.name, roles);
      onNextFrame('agents', drawAgents);
    }
  }
  box.dataset.visit = String(meta.visit || '');
  if (view.network && meta.decision && meta.decision.value !== undefined) {
    const round = meta.round ?? meta.visit;
    const counts = view.shares.get(round) || {};
    counts[meta.decision.value] = (counts[meta.decision.value] || 0) + 1;
    view.shares.set(round, counts);
    view.lastChoice.set(meta.name, String(meta.decision.value));
  }
  if (view.viewer && !sees(view.viewer, box)) box.classList.add('unseen');
  const inRound = meta.round !== undefined && view.round && view.round.dataset.round === String(meta.round);
  const target = inRound ? view.round : (meta.state ? section(meta.state, meta.visit || 1) : lastSection());
  target.append(box);
  view.messages += 1;
  view.newest = box;
  onNextFrame('scroll', () => view.newest && view.newest.isConnected && view.newest.scrollIntoView({ block: 'nearest' }));
}

// Runs `draw` once before the next frame, however often it is asked for until then:
// a replayed round of 100,000 messages lays the page out and lists its speakers once,
// not once per message.
const pendingFrames = new Map();
function onNextFrame(key, draw) {
  if (pendingFrames.has(key)) return;
  pendingFrames.set(key, requestAnimationFrame(() => {
    pendingFrames.delete(key);
    draw();
  }));
}

function dropStreaming() {
  if (view.streaming) view.streaming.node.remove();
  view.streaming = null;
}

function streamToken(name, text) {
  if (!view.streaming || view.streaming.name !== name) {
    dropStreaming();
    const node = el('div', 'msg streaming');
    node.append(el('div', 'speaker', name), el('div', 'text', ''));
    lastSection().append(node);
    view.streaming = { name, node };
  }
  view.streaming.node.querySelector('.text').textContent += text;
}

// A tool's result: its objects as a table, one column per field.
function resultTable(body) {
  const objects = body.objects || [];
  const box = el('div', 'tool-result');
  box.append(el('div', 'status', `${body.type} · ${objects.length} object${objects.length === 1 ? '' : 's'}`));
  const keys = [...new Set(objects.flatMap((o) => Object.keys(o)))];
  const table = el('table');
  const head = el('tr');
  for (const k of keys) head.append(el('th', '', k));
  table.append(head);
  for (const o of objects) {
    const row = el('tr');
    for (const k of keys) {
      const v = o[k];
      row.append(el('td', '', v === undefined ? '' : (typeof v === 'object' ? JSON.stringify(v) : v)));
    }
    table.append(row);
  }
  box.append(table);
  return box;
}

// One Elysia frontend payload, as in events.jsonl.
function render(p) {
  const body = p.payload || {};
  switch (p.type) {
    case 'status': {
      const meta = body.metadata || {};
      const m = /^Entering (.+) \(visit (\d+)\)$/.exec(body.text || '');
      if (m) enterState(m[1], Number(m[2]));
      else if (meta.event === 'world') worldStatus(body.text, meta);
      else if (meta.round !== undefined) roundStatus(body.text, meta);
      else here().append(el('div', 'status', body.text));
      break;
    }
    case 'text': {
      const meta = body.metadata || {};
      const text = (body.objects || []).map((o) => o.text ?? JSON.stringify(o)).join('\n');
      // A tool call or result in the transcript: shown live as its own events.
      if (meta.kind === 'tool_call' || meta.kind === 'tool_result') break;
      addMessage(text, meta);
      if (view.network && meta.decision) view.populationDirty = true;
      break;
    }
    case 'result':
      dropStreaming();
      here().append(resultTable(body));
      break;
    case 'tree_update':
      here().append(el('div', 'status', `${body.node} decided: ${body.decision}`));
      break;
    case 'warning':
      here().append(el('div', 'warning', `⚠ ${body.text}`));
      break;
    case 'self_healing_error':
      here().append(el('div', 'warning', `error: ${body.feedback} ${body.error_message || ''}`));
      break;
    case 'completed':
      dropStreaming();
      break;
    default:
      break;
  }
}

function clearTranscript() {
  $('transcript').replaceChildren();
  view.visits.clear();
  view.visited.clear();
  view.seen = [];
  view.moves.clear();
  view.speakers.clear();
  view.current = null;
  view.messages = 0;
  view.streaming = null;
  view.round = null;
  view.shares.clear();
  view.lastChoice.clear();
  view.world.clear();
  $('world').hidden = true;
}

// ---- the world: its variables after each round ---------------------------------

// The world after a round: a status line, and the round's values for the chart (the
// last status of a round wins: a round may update the world in several states).
function worldStatus(text, meta) {
  here().append(el('div', 'status', text));
  const values = { ...(meta.world || {}) };
  for (const [name, spread] of Object.entries(meta.agents || {})) values[name] = spread.mean;
  view.world.set(meta.round, values);
  $('world').hidden = false;
  onNextFrame('world', drawWorld);
}

// A tick's number in a few characters: 100, 64.8, 0.25.
function short(x) {
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
}

// One small chart a variable, stacked: its value by round, each on its own scale from
// its least to its largest value, so a lake of 100 tons and a count of 3 both read.
function drawWorld() {
  const svg = $('world-chart');
  svg.replaceChildren();
  const rounds = [...view.world.keys()].sort((a, b) => a - b);
  const names = [];
  for (const r of rounds) for (const k of Object.keys(view.world.get(r))) if (!names.includes(k)) names.push(k);
  const w = 300, left = 44, right = 10, panel = 64, gap = 22;
  svg.setAttribute('viewBox', `0 0 ${w} ${Math.max(1, names.length) * (panel + gap) + 16}`);
  const label = (x, y, text, anchor, cls) => {
    const t = svgEl('text', { x, y, 'text-anchor': anchor, class: cls });
    t.textContent = text;
    svg.append(t);
  };
  const span = w - left - right - 8;
  const x = (i) => left + 4 + (rounds.length === 1 ? span / 2 : (i * span) / (rounds.length - 1));
  names.forEach((name, k) => {
    const top = k * (panel + gap) + 20, bottom = top + panel - 16;
    const values = rounds.map((r) => view.world.get(r)[name]);
    const known = values.filter((v) => typeof v === 'number');
    const lo = Math.min(0, ...known), hi = Math.max(...known, lo + 1);
    const y = (v) => bottom - ((v - lo) / (hi - lo)) * (bottom - top);
    label(left, top - 8, name, 'start', 'title');
    svg.append(svgEl('line', { class: 'axis', x1: left, y1: bottom, x2: w - right, y2: bottom }));
    svg.append(svgEl('line', { class: 'axis', x1: left, y1: top, x2: left, y2: bottom }));
    label(left - 4, y(hi) + 3, short(hi), 'end', 'tick');
    label(left - 4, y(lo) + 3, short(lo), 'end', 'tick');
    const step = Math.ceil(rounds.length / 8);
    for (let i = 0; i < rounds.length; i += step) label(x(i), bottom + 11, String(rounds[i]), 'middle', 'tick');
    const points = values.map((v, i) => (typeof v === 'number' ? `${x(i)},${y(v)}` : null)).filter(Boolean);
    svg.append(svgEl('polyline', { points: points.join(' '), fill: 'none', stroke: PALETTE[k % PALETTE.length], 'stroke-width': 2, class: 'world-line', 'data-variable': name }));
    if (points.length === 1) {
      const [cx, cy] = points[0].split(',');
      svg.append(svgEl('circle', { cx, cy, r: 3, fill: PALETTE[k % PALETTE.length] }));
    }
  });
}

// ---- a population: choice shares, the network, one member's view ----------------

// Member name -> { population, index, neighbours: Set of names | null (complete) }.
function members() {
  if (view.network.byName) return view.network.byName;
  const byName = new Map();
  for (const p of view.network.populations || []) {
    const lists = p.links ? p.members.map(() => new Set()) : null;
    for (const [a, b] of p.links || []) {
      lists[a].add(p.members[b]);
      lists[b].add(p.members[a]);
    }
    p.members.forEach((name, i) => byName.set(name, { population: p.name, index: i, neighbours: lists ? lists[i] : null }));
  }
  view.network.byName = byName;
  return byName;
}

// Whether `viewer` could see the message drawn in `box` (the rule of the run's mode;
// the history window aside).
function sees(viewer, box) {
  const all = members();
  const me = all.get(viewer);
  const speaker = box.dataset.name;
  if (!me || speaker === viewer) return true;
  const them = all.get(speaker);
  const cooperative = view.network.mode !== 'competitive';
  if (!them) {
    if (cooperative) return true;
    // Competitive: the public record of a visit the member played in.
    return [...document.querySelectorAll('#transcript .msg')]
      .some((m) => m.dataset.name === viewer && m.dataset.visit === box.dataset.visit);
  }
  if (!cooperative) return false;
  if (them.population !== me.population) return !me.neighbours && !them.neighbours;
  return !me.neighbours || me.neighbours.has(speaker);
}

function viewAs(name) {
  view.viewer = name;
  for (const box of document.querySelectorAll('#transcript .msg')) {
    box.classList.toggle('unseen', Boolean(name) && !sees(name, box));
  }
  const line = $('viewing');
  line.replaceChildren();
  if (name) {
    const me = members().get(name);
    const n = me && me.neighbours ? `${me.neighbours.size} neighbours` : 'everyone';
    line.append(`What ${name} saw (${n}, ${view.network.mode || 'cooperative'} mode).`);
    const all = el('button', null, 'everyone');
    all.type = 'button';
    all.addEventListener('click', () => viewAs(null));
    line.append(all);
  } else {
    line.append('Click a member to see what it saw.');
  }
  drawNetwork();
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

function choiceColours() {
  const values = [];
  for (const counts of view.shares.values()) for (const v of Object.keys(counts)) if (!values.includes(v)) values.push(v);
  values.sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return new Map(values.map((v, i) => [v, PALETTE[i % PALETTE.length]]));
}

function svgEl(tag, attrs) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// Each choice's share of the round's decisions, round by round: the share on the y
// axis (0 to 100%), the rounds on the x axis (at most eight numbered), and a legend
// below that wraps, so no label lands on another whatever the rounds and choices.
function drawShares() {
  const svg = $('shares');
  svg.replaceChildren();
  const rounds = [...view.shares.keys()].sort((a, b) => a - b);
  const colours = choiceColours();
  const w = 300, left = 32, right = 10, top = 8, bottom = 98;
  const charWidth = 6.5; // of the panel's 10px labels
  const legend = [];
  let lx = left, ly = bottom + 42;
  for (const [value, colour] of colours) {
    const width = 14 + charWidth * String(value).length + 10;
    if (lx + width > w && lx > left) { lx = left; ly += 14; }
    legend.push({ value, colour, x: lx, y: ly });
    lx += width;
  }
  const h = (legend.length ? ly : bottom + 28) + 6;
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  const label = (x, y, text, anchor, cls) => {
    const t = svgEl('text', { x, y, 'text-anchor': anchor, class: cls });
    t.textContent = text;
    svg.append(t);
  };
  const y = (share) => bottom - share * (bottom - top);
  svg.append(svgEl('line', { class: 'axis', x1: left, y1: bottom, x2: w - right, y2: bottom }));
  svg.append(svgEl('line', { class: 'axis', x1: left, y1: top, x2: left, y2: bottom }));
  for (const share of [0, 0.5, 1]) {
    label(left - 4, y(share) + 3, `${share * 100}%`, 'end', 'tick');
    if (share) svg.append(svgEl('line', { class: 'grid', x1: left, y1: y(share), x2: w - right, y2: y(share) }));
  }
  label(left + (w - left - right) / 2, bottom + 26, 'round', 'middle', 'title');
  if (!rounds.length) return;
  const span = w - left - right - 8;
  const x = (i) => left + 4 + (rounds.length === 1 ? span / 2 : (i * span) / (rounds.length - 1));
  const step = Math.ceil(rounds.length / 8);
  for (let i = 0; i < rounds.length; i += step) label(x(i), bottom + 12, String(rounds[i]), 'middle', 'tick');
  const last = rounds.length - 1;
  if (last % step && x(last) - x(last - (last % step)) > 20) label(x(last), bottom + 12, String(rounds[last]), 'middle', 'tick');
  for (const { value, colour, x: ex, y: ey } of legend) {
    const points = rounds.map((r, i) => {
      const counts = view.shares.get(r);
      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      return `${x(i)},${y((counts[value] || 0) / total)}`;
    });
    svg.append(svgEl('polyline', { points: points.join(' '), fill: 'none', stroke: colour, 'stroke-width': 2, class: 'share', 'data-choice': value }));
    // A single round is a point, not a line.
    if (rounds.length === 1) {
      const [cx, cy] = points[0].split(',');
      svg.append(svgEl('circle', { cx, cy, r: 3, fill: colour }));
    }
    svg.append(svgEl('rect', { x: ex, y: ey - 8, width: 10, height: 8, fill: colour }));
    label(ex + 14, ey, value, 'start', 'legend');
  }
}

// The members of a large network to draw: those nearest `start` by links (breadth
// first), up to `limit`, so a sample of 100,000 members shows one neighbourhood with
// its links rather than the first members by number, who may share none.
function nearest(p, start, limit) {
  const n = p.members.length;
  if (n <= limit) return [...Array(n).keys()];
  // A complete network: everyone is as near; the members from `start` on, by number.
  if (!p.links) return [...Array(limit).keys()].map((k) => (start + k) % n);
  const adjacent = new Map();
  for (const [a, b] of p.links) {
    if (!adjacent.has(a)) adjacent.set(a, []);
    if (!adjacent.has(b)) adjacent.set(b, []);
    adjacent.get(a).push(b);
    adjacent.get(b).push(a);
  }
  const order = [start];
  const seen = new Set(order);
  for (let k = 0; k < order.length && order.length < limit; k++) {
    for (const m of adjacent.get(order[k]) || []) {
      if (seen.has(m)) continue;
      seen.add(m);
      order.push(m);
      if (order.length === limit) break;
    }
  }
  // A member without links (or a small component) leaves room: fill it by number.
  for (let i = 0; order.length < limit && i < n; i++) if (!seen.has(i)) { seen.add(i); order.push(i); }
  return order;
}

// The first population's network: all of it up to 400 members, else the 400 nearest
// the member whose view is shown (or the first); a lattice drawn whole on its grid,
// anything else on a circle.
function drawNetwork() {
  const svg = $('network');
  svg.replaceChildren();
  const p = (view.network.populations || [])[0];
  if (!p) return;
  const viewer = p.members.indexOf(view.viewer);
  const sample = nearest(p, viewer >= 0 ? viewer : 0, 400);
  const shown = sample.length;
  // On the circle by number: a ring's neighbours sit side by side.
  const place = new Map([...sample].sort((a, b) => a - b).map((m, k) => [m, k]));
  const w = 300;
  let pos;
  const width = p.kind === 'lattice' ? Math.round(Math.sqrt(p.members.length)) : 0;
  if (width && shown === p.members.length && p.members.length % width === 0) {
    const cell = w / Math.max(width, p.members.length / width);
    pos = (i) => [cell * (i % width) + cell / 2, cell * Math.floor(i / width) + cell / 2];
  } else {
    pos = (i) => {
      const a = (2 * Math.PI * place.get(i)) / shown;
      return [w / 2 + (w / 2 - 8) * Math.cos(a), w / 2 + (w / 2 - 8) * Math.sin(a)];
    };
  }
  svg.setAttribute('viewBox', `0 0 ${w} ${w}`);
  for (const [a, b] of p.links || []) {
    if (!place.has(a) || !place.has(b)) continue;
    // Wrapping links of a torus would cross the whole grid.
    const [x1, y1] = pos(a), [x2, y2] = pos(b);
    if (width && (Math.abs(x1 - x2) > w / 2 || Math.abs(y1 - y2) > w / 2)) continue;
    svg.append(svgEl('line', { x1, y1, x2, y2 }));
  }
  const colours = choiceColours();
  const r = Math.max(2, Math.min(8, 600 / shown));
  for (const i of sample) {
    const name = p.members[i];
    const [cx, cy] = pos(i);
    const c = svgEl('circle', { cx, cy, r, fill: colours.get(view.lastChoice.get(name)) || '#bbb', 'data-name': name });
    if (name === view.viewer) c.classList.add('chosen');
    const title = svgEl('title', {});
    title.textContent = `${name}${view.lastChoice.has(name) ? `: ${view.lastChoice.get(name)}` : ''}`;
    c.append(title);
    c.addEventListener('click', () => viewAs(name === view.viewer ? null : name));
    svg.append(c);
  }
  if (shown < p.members.length) {
    const t = svgEl('text', { x: 4, y: w - 4 });
    t.textContent = p.links
      ? `the ${shown} of ${p.members.length} members nearest ${p.members[sample[0]]}`
      : `${shown} of ${p.members.length} members, from ${p.members[sample[0]]}`;
    svg.append(t);
  }
}

function drawPopulation() {
  if (!view.network) return;
  $('population').hidden = false;
  drawShares();
  drawNetwork();
  if (!$('viewing').textContent) viewAs(view.viewer);
}

// A member's name in the transcript shows its view too.
document.addEventListener('click', (e) => {
  const who = e.target.closest && e.target.closest('#transcript .speaker');
  if (!who || !view.network) return;
  const name = who.closest('.msg').dataset.name;
  if (members().has(name)) viewAs(name);
});

// ---- the side panel -------------------------------------------------------------

// The scenario's states and transitions when the page has the scenario (a live run);
// otherwise those the run went through, in the order it first entered them.
function graphStates() {
  if (view.scenario && view.scenario.states) return view.scenario.states;
  return view.seen.map((name) => ({
    name,
    next: [...view.moves].filter((m) => m.startsWith(`${name}\u0000`)).map((m) => m.split('\u0000')[1]),
  }));
}

function drawGraph() {
  const svg = $('graph');
  const ns = 'http://www.w3.org/2000/svg';
  const states = graphStates();
  svg.replaceChildren();
  const defs = document.createElementNS(ns, 'defs');
  const marker = document.createElementNS(ns, 'marker');
  for (const [k, v] of Object.entries({ id: 'arrow', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '6', markerHeight: '6', orient: 'auto' })) marker.setAttribute(k, v);
  const tip = document.createElementNS(ns, 'path');
  tip.setAttribute('d', 'M0,0 L10,5 L0,10 z');
  tip.setAttribute('fill', '#b0b0b8');
  marker.append(tip);
  defs.append(marker);
  svg.append(defs);
  const w = 300, rowH = 44, boxW = 200, boxH = 28;
  const pos = new Map();
  states.forEach((s, i) => pos.set(s.name, { x: (w - boxW) / 2, y: 8 + i * rowH }));
  svg.setAttribute('viewBox', `0 0 ${w} ${Math.max(60, 16 + states.length * rowH)}`);
  for (const s of states) {
    for (const n of s.next || []) {
      const a = pos.get(s.name), b = pos.get(n);
      if (!a || !b || n === s.name) continue;
      const line = document.createElementNS(ns, 'line');
      const down = b.y > a.y;
      line.setAttribute('x1', a.x + boxW / 2 + (down ? 0 : 30));
      line.setAttribute('y1', down ? a.y + boxH : a.y);
      line.setAttribute('x2', b.x + boxW / 2 + (down ? 0 : 30));
      line.setAttribute('y2', down ? b.y : b.y + boxH);
      svg.append(line);
    }
  }
  for (const s of states) {
    const p = pos.get(s.name);
    const g = document.createElementNS(ns, 'g');
    const visits = view.visited.get(s.name) || 0;
    g.setAttribute('class', `node${s.name === view.current ? ' current' : ''}${visits ? ' visited' : ''}`);
    g.dataset.state = s.name;
    const rect = document.createElementNS(ns, 'rect');
    rect.setAttribute('x', p.x); rect.setAttribute('y', p.y);
    rect.setAttribute('width', boxW); rect.setAttribute('height', boxH);
    const label = document.createElementNS(ns, 'text');
    label.setAttribute('x', p.x + 8); label.setAttribute('y', p.y + 18);
    label.textContent = visits ? `${s.name} · ${visits} ${visits === 1 ? 'visit' : 'visits'}` : s.name;
    g.append(rect, label);
    svg.append(g);
  }
}

function drawAgents() {
  const list = $('agents');
  list.replaceChildren();
  let agents = (view.scenario && view.scenario.agents)
    || [...view.speakers].map(([name, roles]) => ({ name, roles: Object.fromEntries([...roles].map((r, i) => [i, r])) }));
  if (view.network) {
    // A population is one line, however many members it has.
    const all = members();
    agents = agents.filter((a) => !all.has(a.name));
    for (const p of view.network.populations || []) {
      const li = el('li');
      const first = p.members[0], last = p.members[p.members.length - 1];
      li.append(el('span', 'speaker', p.name), el('span', 'role', ` ${p.members.length} members (${first}…${last}), ${p.kind} network`));
      list.append(li);
    }
  }
  for (const a of agents) {
    const roles = [...new Set(Object.values(a.roles || {}))];
    const li = el('li');
    const name = el('span', 'speaker', a.name);
    name.style.setProperty('--role', roleColour(roles[0] || a.name));
    li.append(name, el('span', 'role', ` ${roles.join(', ')}${a.human ? ' · typed by a person' : ''}`));
    list.append(li);
  }
}

function drawCounters(p) {
  const dl = $('counters');
  dl.replaceChildren();
  const rows = [
    ['turns', p.turns],
    ['prompt tokens', p.prompt_tokens],
    ['completion tokens', p.completion_tokens],
    ['cost', p.cost_usd == null ? 'unknown price' : `$${Number(p.cost_usd).toFixed(6)}`],
  ];
  for (const [k, v] of Object.entries(p.calls || {})) rows.push([`${k} calls`, v]);
  const q = p.reply_quality;
  if (q && q.replies) {
    const share = (n) => `${n} of ${q.replies} (${Math.round((100 * n) / q.replies)}%)`;
    rows.push(
      ['replies that copy', share(q.copy)],
      ['speaker labels', share(q.label)],
      ['third-person openings', share(q.narration)],
      ['instruction echoes', share(q.echo)],
      ['empty replies', share(q.empty)],
      ['cut mid-sentence', share(q.cut || 0)],
      ['stage directions', share(q.stage || 0)],
      ['speaking as someone else', share(q.impersonation || 0)],
      ['foreign script', share(q.foreign || 0)],
      ['paraphrase loops', q.paraphrase == null ? '—' : share(q.paraphrase)],
      ['off their stake', q.off_stake == null ? '—' : share(q.off_stake)],
      ['refusals', share(q.refusal || 0)],
      ['distinct bigrams', q.distinct_2 == null ? '—' : `${Math.round(100 * q.distinct_2)}%`],
    );
  }
  for (const [k, v] of rows) dl.append(el('dt', null, k), el('dd', null, v ?? 0));
}

function setStatus(text, cls) {
  const s = $('status');
  s.textContent = text;
  s.className = `badge ${cls || ''}`;
}

// ---- a live run -----------------------------------------------------------------

// One input box per person the run waits for (several in a simultaneous round), each
// sending to its own person. A box already shown keeps what is being typed in it.
function showWaiting(waiting) {
  const box = $('human');
  const names = new Set(waiting.map((w) => w.name));
  for (const form of [...box.querySelectorAll('form')]) {
    if (!names.has(form.dataset.name)) form.remove();
  }
  for (const w of waiting) {
    if (box.querySelector(`form[data-name="${CSS.escape(w.name)}"]`)) continue;
    const form = el('form', 'human-form');
    form.dataset.name = w.name;
    const label = el('label', null, `${w.name} (${w.role}) — your turn:`);
    const text = el('textarea');
    text.rows = 2;
    text.setAttribute('aria-label', `${w.name}'s turn`);
    form.append(label, text, el('button', null, 'Send'));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (!text.value.trim()) return;
      const reply = await post('/api/input', { name: w.name, text: text.value });
      if (reply.error) label.textContent = reply.error;
      else text.value = '';
    });
    box.append(form);
  }
  box.hidden = waiting.length === 0;
  const first = box.querySelector('textarea');
  if (first && !box.contains(document.activeElement)) first.focus();
}

function startLive(state) {
  view.scenario = state.scenario;
  $('title').textContent = state.scenario.name || 'sopsim';
  $('live-controls').hidden = false;
  drawAgents();
  drawGraph();
  for (const id of ['pause', 'step', 'resume', 'stop']) {
    $(id).addEventListener('click', () => post(`/api/${id}`, {}));
  }
  const source = new EventSource('/events');
  source.addEventListener('message', (e) => render(JSON.parse(e.data)));
  source.addEventListener('token', (e) => {
    const t = JSON.parse(e.data);
    streamToken(t.name, t.text);
  });
  // The reply streamed so far is drawn again: its next draw streams afresh.
  source.addEventListener('redrawn', () => dropStreaming());
  // A population's panel is drawn again at most once per progress report.
  drawPopulation();
  source.addEventListener('progress', (e) => {
    if (view.populationDirty) {
      view.populationDirty = false;
      drawPopulation();
    }
    const p = JSON.parse(e.data);
    drawCounters(p);
    if (!$('status').classList.contains('ended')) setStatus(p.paused ? 'paused' : 'running', p.paused ? 'paused' : '');
  });
  source.addEventListener('input', (e) => {
    const data = JSON.parse(e.data);
    showWaiting(data.waiting || (data.waiting_for ? [data.waiting_for] : []));
  });
  source.addEventListener('end', (e) => {
    const end = JSON.parse(e.data);
    setStatus(`ended by ${end.ended_by} after ${end.turns} turns`, 'ended');
    $('transcript').append(el('div', 'end', `The run ended (${end.ended_by}) after ${end.turns} turns.`));
    $('live-controls').hidden = true;
  });
  // A browser too slow for the run was dropped: start again from the beginning.
  source.addEventListener('reload', () => location.reload());
  // A long run's oldest events are no longer kept by the server.
  source.addEventListener('forgotten', (e) => {
    const f = JSON.parse(e.data);
    $('transcript').append(el('div', 'end',
      `${f.events} earlier events are not shown: the server keeps the newest ${f.kept}` +
      ' (the run folder\'s events.jsonl has every one).'));
  });
  source.addEventListener('open', () => {
    if ($('status').textContent === 'connecting…') setStatus(state.paused ? 'paused' : 'running', state.paused ? 'paused' : '');
  });
}

// ---- a finished run, replayed ---------------------------------------------------

// Where each step of a replay starts: a message (or a tool's result) on its own, or a
// whole simultaneous round from its start to its end.
function stepStarts(events) {
  const idx = [];
  let inRound = false;
  events.forEach((p, i) => {
    const meta = (p.payload && p.payload.metadata) || {};
    if (p.type === 'status' && meta.event === 'round_start') {
      idx.push(i);
      inRound = true;
    } else if (p.type === 'status' && meta.event === 'round_end') {
      inRound = false;
    } else if (!inRound && (p.type === 'text' || p.type === 'result')) {
      idx.push(i);
    }
  });
  return idx;
}

function startReplay(events, summary) {
  $('replay-controls').hidden = false;
  const turns = stepStarts(events);
  const slider = $('slider');
  slider.max = String(turns.length);
  let shown = 0;
  let timer = null;
  const show = (n) => {
    shown = Math.max(0, Math.min(n, turns.length));
    clearTranscript();
    const upto = shown === turns.length ? events.length : turns[shown];
    for (let i = 0; i < upto; i++) render(events[i]);
    drawGraph();
    drawPopulation();
    slider.value = String(shown);
    $('slider-value').textContent = `${shown} / ${turns.length}`;
    if (shown === turns.length && summary) {
      setStatus(`ended by ${summary.ended_by} after ${summary.turns} turns`, 'ended');
    } else {
      setStatus(`replay: ${shown} of ${turns.length} steps`);
    }
  };
  const stopTimer = () => { if (timer) clearInterval(timer); timer = null; $('play').textContent = 'Play'; };
  slider.addEventListener('input', () => { stopTimer(); show(Number(slider.value)); });
  $('play').addEventListener('click', () => {
    if (timer) return stopTimer();
    const speed = Number($('speed').value);
    if (speed === 0) return show(turns.length);
    if (shown >= turns.length) show(0);
    $('play').textContent = 'Pause';
    timer = setInterval(() => {
      if (shown >= turns.length) return stopTimer();
      show(shown + 1);
    }, 1000 / speed);
  });
  if (summary) drawCounters({
    turns: summary.turns,
    prompt_tokens: summary.prompt_tokens,
    completion_tokens: summary.completion_tokens,
    cost_usd: summary.cost_usd,
    calls: Object.fromEntries(Object.entries(summary.llm_calls || {}).filter(([k, v]) => k !== 'total' && v > 0)),
    reply_quality: summary.reply_quality,
  });
  show(turns.length);
}

// ---- a benchmark ----------------------------------------------------------------

function fmt(x) {
  return typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : (x ?? '—');
}

function startBench(state) {
  const report = state.report || {};
  const root = $('bench');
  root.hidden = false;
  $('transcript').hidden = true;
  document.querySelector('aside').hidden = true;
  document.body.classList.add('bench');
  $('title').textContent = 'sopsim benchmark';
  setStatus(`${state.runs.length} runs`);
  const modes = report.modes || [];
  for (const sc of report.scenarios || []) {
    root.append(el('h2', null, sc.scenario));
    const table = el('table', 'headline');
    const head = el('tr');
    head.append(el('th', null, 'figure'));
    for (const m of modes) head.append(el('th', null, `${m} (mean, 95% CI)`));
    if (report.difference) head.append(el('th', null, `difference: ${report.difference} (95% CI, p)`));
    table.append(head);
    const interval = (ci) => (ci ? ` [${fmt(ci[0])}, ${fmt(ci[1])}]` : '');
    for (const name of sc.headline || []) {
      const f = sc.figures[name];
      if (!f) continue;
      const tr = el('tr');
      tr.append(el('td', null, name));
      for (const m of modes) {
        const s = (f.by_mode || {})[m] || {};
        tr.append(el('td', null, s.n ? `${fmt(s.mean)}${interval(s.ci95)}` : '—'));
      }
      if (report.difference) {
        const d = f.difference;
        const p = d && typeof d.p === 'number' ? (d.p < 0.001 ? ', p < 0.001' : `, p ${d.p.toFixed(3)}`) : '';
        const td = el('td', 'difference', d ? `${fmt(d.mean)}${interval(d.ci95)}${p}` : '—');
        if (d) td.title = d.method === 'bootstrap' ? 'bootstrap interval, sign-flip permutation test' : 'Student-t interval, paired t-test';
        tr.append(td);
      }
      table.append(tr);
    }
    root.append(table);
    const plots = el('div', 'plots');
    for (const p of state.plots.filter((p) => p.startsWith(`${sc.scenario}-`) && p.endsWith('.svg'))) {
      const img = el('img');
      img.src = `/plots/${encodeURIComponent(p)}`;
      img.alt = p;
      plots.append(img);
    }
    root.append(plots);
    const runs = el('table', 'runs');
    const names = sc.headline || [];
    const rh = el('tr');
    for (const h of ['run', 'mode', 'seed', ...names]) rh.append(el('th', null, h));
    runs.append(rh);
    for (const m of modes) {
      (report.seeds || []).forEach((seed, i) => {
        const id = `${sc.scenario}/${m}/seed-${seed}`;
        if (!state.runs.includes(id)) return;
        const tr = el('tr', 'run');
        tr.dataset.id = id;
        const link = el('a', null, id);
        link.href = `/?run=${encodeURIComponent(id)}`;
        const first = el('td');
        first.append(link);
        tr.append(first, el('td', null, m), el('td', null, seed));
        for (const n of names) {
          const v = ((sc.figures[n] || {}).values || {})[m];
          tr.append(el('td', null, fmt(v ? v[i] : null)));
        }
        runs.append(tr);
      });
    }
    root.append(el('h3', null, 'Every run'), runs);
  }
}

// ---- start ----------------------------------------------------------------------

// The run's networks, or null for a run without populations (a 404).
async function network(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  return r.ok ? r.json() : null;
}

async function main() {
  const state = await getJson('/api/state');
  if (state.mode === 'live') {
    view.network = await network('/api/network');
    return startLive(state);
  }
  if (state.mode === 'run') {
    $('title').textContent = (state.summary && state.summary.scenario) || 'sopsim run';
    view.network = await network('/api/network');
    return startReplay(await getJson('/api/events'), state.summary);
  }
  if (state.mode === 'bench') {
    const run = params.get('run');
    if (!run) return startBench(state);
    $('title').textContent = run;
    const base = `/api/runs/${run.split('/').map(encodeURIComponent).join('/')}`;
    const [events, summary, net] = await Promise.all([
      getJson(`${base}/events`),
      getJson(`${base}/summary`).catch(() => null),
      network(`${base}/network`),
    ]);
    view.network = net;
    return startReplay(events, summary);
  }
}

main().catch((e) => setStatus(`error: ${e.message}`));
