// A finished run, replayed with a speed and a slider a turn (or a round) at a time.

import { $ } from './dom.js';
import { clearTranscript, render } from './transcript.js';
import { drawPopulation } from './population.js';
import { drawCounters, drawGraph, setStatus } from './panel.js';

// Where each step of a replay starts: a message (or a tool's result) on its own, or a
// whole simultaneous round from its start to its end.
export function stepStarts(events) {
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

export function startReplay(events, summary) {
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
