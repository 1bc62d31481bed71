// What a finished run measured besides its moves: its probes' answers by wave and
// round, and its judged scores. Answers are model text: shown with textContent only.

import { $, el } from './dom.js';

// The rows of one probe's table an agent each at most; more are counted, not shown.
const MAX_AGENT_ROWS = 40;

// A wave's heading: when it was asked, and the world's round where there is one.
function waveLabel(a) {
  const when = a.when === 'start' ? 'start' : a.when === 'end' ? 'end' : a.when;
  return a.round == null ? `${when} (turn ${a.turn})` : `${when} · round ${a.round}`;
}

// A number in a few characters.
function short(x) {
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

// One wave's answers in a cell: the mean of numbers, or each option's share (and the
// mean angle of the SVO slider, whose answers are categories with an angle).
function waveSummary(answers) {
  const values = answers.map((a) => a.value).filter((v) => typeof v === 'number');
  const mean = values.length ? `mean ${short(values.reduce((s, v) => s + v, 0) / values.length)}` : '';
  const numbers = values.length && answers.every((a) => a.value == null || Number(a.answer) === a.value);
  if (numbers) return `${mean} of ${values.length}`;
  const counts = new Map();
  for (const a of answers) counts.set(a.answer || '(no answer)', (counts.get(a.answer || '(no answer)') || 0) + 1);
  const shares = counts.size > 6
    ? `${counts.size} different answers`
    : [...counts].map(([option, n]) => `${option} ${Math.round((100 * n) / answers.length)}%`).join(' · ');
  return answers.some((a) => a.items) ? `${shares} · ${mean}°` : shares;
}

// An answer as its cell shows it: a number or a choice as given, text cut short.
function cellText(a) {
  if (!a) return '';
  const text = a.answer || (a.value == null ? '' : short(a.value));
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

export function drawProbes(lines) {
  if (!lines || !lines.length) return;
  const box = $('probe-tables');
  box.replaceChildren();
  const byProbe = new Map();
  for (const a of lines) {
    if (!byProbe.has(a.probe)) byProbe.set(a.probe, []);
    byProbe.get(a.probe).push(a);
  }
  for (const [name, answers] of byProbe) {
    const waves = [...new Set(answers.map((a) => a.asking))].sort((x, y) => x - y);
    const labels = waves.map((w) => waveLabel(answers.find((a) => a.asking === w)));
    const agents = [...new Set(answers.map((a) => a.agent))];
    const table = el('table', 'probe');
    table.dataset.probe = name;
    const head = el('tr');
    head.append(el('th', null, name), ...labels.map((l) => el('th', null, l)));
    const summary = el('tr', 'wave-summary');
    summary.append(el('td', null, 'all'), ...waves.map((w) => el('td', null, waveSummary(answers.filter((a) => a.asking === w)))));
    table.append(head, summary);
    for (const agent of agents.slice(0, MAX_AGENT_ROWS)) {
      const row = el('tr');
      row.dataset.agent = agent;
      row.append(el('td', 'speaker', agent));
      for (const w of waves) row.append(el('td', null, cellText(answers.find((a) => a.agent === agent && a.asking === w))));
      table.append(row);
    }
    box.append(table);
    if (agents.length > MAX_AGENT_ROWS) box.append(el('p', 'status', `and ${agents.length - MAX_AGENT_ROWS} more agents (probes.jsonl has every answer)`));
  }
  $('probes').hidden = false;
}

export function drawJudgement(j) {
  if (!j || !j.scores) return;
  const box = $('judged-table');
  box.replaceChildren();
  const subjects = Object.keys(j.scores);
  const dimensions = [];
  for (const s of subjects) for (const d of Object.keys(j.scores[s])) if (!dimensions.includes(d)) dimensions.push(d);
  const table = el('table', 'judged');
  const head = el('tr');
  head.append(el('th', null, ''), ...subjects.map((s) => el('th', 'speaker', s)));
  table.append(head);
  for (const d of dimensions) {
    const row = el('tr');
    row.dataset.dimension = d;
    const scale = (j.scales || {})[d];
    row.append(el('td', null, scale ? `${d} (${scale[0]} to ${scale[1]})` : d));
    for (const s of subjects) {
      const score = j.scores[s][d];
      const cell = el('td', null, score ? short(score.score) + (score.sd == null ? '' : ` ± ${short(score.sd)}`) : '—');
      if (score) cell.title = `samples: ${score.samples.join(', ')}`;
      row.append(cell);
    }
    table.append(row);
  }
  const notes = [`judged by ${j.judge} on ${j.rubric}, ${j.samples} ${j.samples === 1 ? 'sample' : 'samples'} an item`];
  if (j.shares_a_model) notes.push('the judge is one of the run\'s models: it may prefer its own replies');
  if (j.failed && j.failed.length) notes.push(`${j.failed.length} item(s) could not be scored`);
  box.append(table, ...notes.map((n) => el('p', 'status', n)));
  $('judged').hidden = false;
}
