// The bottom of the page's modules: the view every part of the page shares (what the
// run has shown so far), and drawing put off to the next frame. It imports nothing.

export const view = {
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

// Runs `draw` once before the next frame, however often it is asked for until then:
// a replayed round of 100,000 messages lays the page out and lists its speakers once,
// not once per message.
export const pendingFrames = new Map();
export function onNextFrame(key, draw) {
  if (pendingFrames.has(key)) return;
  pendingFrames.set(key, requestAnimationFrame(() => {
    pendingFrames.delete(key);
    draw();
  }));
}

