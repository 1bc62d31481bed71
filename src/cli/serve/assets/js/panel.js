// The side panel: the SOP's graph, the agents, the counters and the status.

import { $, el, roleColour } from './dom.js';
import { view } from './state.js';
import { members } from './population.js';

// The scenario's states and transitions when the page has the scenario (a live run);
// otherwise those the run went through, in the order it first entered them.
export function graphStates() {
  if (view.scenario && view.scenario.states) return view.scenario.states;
  return view.seen.map((name) => ({
    name,
    next: [...view.moves].filter((m) => m.startsWith(`${name}\u0000`)).map((m) => m.split('\u0000')[1]),
  }));
}

export function drawGraph() {
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

export function drawAgents() {
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

export function drawCounters(p) {
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

export function setStatus(text, cls) {
  const s = $('status');
  s.textContent = text;
  s.className = `badge ${cls || ''}`;
}
