// The transcript: sections by state and visit, messages and simultaneous rounds,
// replies as they stream, and tool results. It sits above the side panel, the world
// and the population, which it tells what the run said.

import { $, el, roleColour } from './dom.js';
import { onNextFrame, view } from './state.js';
import { recordWorld } from './world.js';
import { nearest, sees } from './population.js';
import { drawAgents, drawGraph } from './panel.js';


export function section(state, visit) {
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

export function enterState(state, visit) {
  if (view.current !== null && view.current !== state) view.moves.add(`${view.current}\u0000${state}`);
  if (!view.visited.has(state)) view.seen.push(state);
  view.visited.set(state, (view.visited.get(state) || 0) + 1);
  view.current = state;
  section(state, visit);
  drawGraph();
}

export function lastSection() {
  const all = $('transcript').querySelectorAll('.visit');
  return all.length ? all[all.length - 1] : $('transcript');
}

// Where the next line goes: into the round in progress, if any.
export function here() {
  return view.round || lastSection();
}

// A round's start (a new block) or end (the block is complete).
export function roundStatus(text, meta) {
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

export function addMessage(text, meta) {
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

export function dropStreaming() {
  if (view.streaming) view.streaming.node.remove();
  view.streaming = null;
}

export function streamToken(name, text) {
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
export function resultTable(body) {
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
export function render(p) {
  const body = p.payload || {};
  switch (p.type) {
    case 'status': {
      const meta = body.metadata || {};
      const m = /^Entering (.+) \(visit (\d+)\)$/.exec(body.text || '');
      if (m) enterState(m[1], Number(m[2]));
      else if (meta.event === 'world') {
        here().append(el('div', 'status', body.text));
        recordWorld(meta);
      }
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

export function clearTranscript() {
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
