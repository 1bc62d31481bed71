// A live run: server-sent events, the controls, a person's turn.

import { $, el, post } from './dom.js';
import { dropStreaming, render, streamToken } from './transcript.js';
import { view } from './state.js';
import { drawPopulation } from './population.js';
import { drawAgents, drawCounters, drawGraph, setStatus } from './panel.js';

// One input box per person the run waits for (several in a simultaneous round), each
// sending to its own person. A box already shown keeps what is being typed in it.
export function showWaiting(waiting) {
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

export function startLive(state) {
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
