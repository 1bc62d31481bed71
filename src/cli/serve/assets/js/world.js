// The world: its variables after each round, charted.

import { $ } from './dom.js';
import { onNextFrame, view } from './state.js';
import { PALETTE, svgEl } from './draw.js';

// The world after a round: the round's values for the chart (the last status of a
// round wins: a round may update the world in several states).
export function recordWorld(meta) {
  const values = { ...(meta.world || {}) };
  for (const [name, spread] of Object.entries(meta.agents || {})) values[name] = spread.mean;
  view.world.set(meta.round, values);
  $('world').hidden = false;
  onNextFrame('world', drawWorld);
}

// A tick's number in a few characters: 100, 64.8, 0.25.
export function short(x) {
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
}

// One small chart a variable, stacked: its value by round, each on its own scale from
// its least to its largest value, so a lake of 100 tons and a count of 3 both read.
export function drawWorld() {
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
