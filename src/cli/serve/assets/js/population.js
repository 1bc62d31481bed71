// A population: choice shares by round, the network, one member's view.

import { $, el } from './dom.js';
import { view } from './state.js';
import { PALETTE, svgEl } from './draw.js';

// Member name -> { population, index, neighbours: Set of names | null (complete) }.
export function members() {
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
export function sees(viewer, box) {
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

export function viewAs(name) {
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

export function choiceColours() {
  const values = [];
  for (const counts of view.shares.values()) for (const v of Object.keys(counts)) if (!values.includes(v)) values.push(v);
  values.sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return new Map(values.map((v, i) => [v, PALETTE[i % PALETTE.length]]));
}

// Each choice's share of the round's decisions, round by round: the share on the y
// axis (0 to 100%), the rounds on the x axis (at most eight numbered), and a legend
// below that wraps, so no label lands on another whatever the rounds and choices.
export function drawShares() {
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
export function nearest(p, start, limit) {
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
export function drawNetwork() {
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

export function drawPopulation() {
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
