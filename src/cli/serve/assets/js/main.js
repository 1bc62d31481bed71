// The sopsim viewer. Three views over the same Elysia frontend payloads that a run
// writes to events.jsonl: a live run (server-sent events), a finished run (replayed
// with a speed and a slider that steps a turn, or a simultaneous round, at a time) and
// a benchmark (tables, plots, every run). A simultaneous round is one block: its
// messages arrive together, between the round's start and end statuses.
// Model text is only ever inserted with textContent, never parsed as HTML.
// Each concern is a module of its own, loaded by the browser as it is (no build step).

import { $, getJson, params } from './dom.js';
import { view } from './state.js';
import { setStatus } from './panel.js';
import { startLive } from './live.js';
import { startReplay } from './replay.js';
import { startBench } from './bench.js';
import { drawJudgement, drawProbes } from './measures.js';

// A run's file that it may not have (its networks, probes, judgement): null on a 404.
async function optional(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  return r.ok ? r.json() : null;
}

// A finished run's measures beside its replay; a run without them shows none.
async function measures(base) {
  const [probes, judgement] = await Promise.all([optional(`${base}/probes`), optional(`${base}/judgement`)]);
  drawProbes(probes);
  drawJudgement(judgement);
}

async function main() {
  const state = await getJson('/api/state');
  if (state.mode === 'live') {
    view.network = await optional('/api/network');
    return startLive(state);
  }
  if (state.mode === 'run') {
    $('title').textContent = (state.summary && state.summary.scenario) || 'sopsim run';
    view.network = await optional('/api/network');
    await measures('/api');
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
      optional(`${base}/network`),
    ]);
    view.network = net;
    await measures(base);
    return startReplay(events, summary);
  }
}

main().catch((e) => setStatus(`error: ${e.message}`));
