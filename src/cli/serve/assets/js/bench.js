// A benchmark: tables, plots and every run.

import { $, el } from './dom.js';
import { setStatus } from './panel.js';

export function fmt(x) {
  return typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : (x ?? '—');
}

export function startBench(state) {
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
