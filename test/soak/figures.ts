/** The soak's arithmetic, apart from the processes so that it can be checked on its own. */

/**
 * Jain's fairness index over per-party throughputs: (Σx)² / (n·Σx²). 1 when every party got the
 * same; 1/n when one got everything. 1 for no parties or all zeros (nobody was treated worse).
 */
export function jainIndex(values: readonly number[]): number {
  const sum = values.reduce((total, value) => total + value, 0);
  const squares = values.reduce((total, value) => total + value * value, 0);
  return squares === 0 ? 1 : (sum * sum) / (values.length * squares);
}

/** The nearest-rank percentile (`p` in 0..1) of `values`; 0 for none. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))] ?? 0;
}

/** The most intervals open at one instant (an interval without an end is open to the last). */
export function maxOverlap(intervals: ReadonlyArray<{ from: number; to: number | undefined }>): number {
  const events = intervals.flatMap(({ from, to }) => [
    { at: from, delta: 1 },
    ...(to === undefined ? [] : [{ at: to, delta: -1 }]),
  ]);
  // Ends before starts at the same instant: a sandbox deleted as another is made is not two at once.
  events.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let open = 0;
  let most = 0;
  for (const event of events) {
    open += event.delta;
    most = Math.max(most, open);
  }
  return most;
}

/** A small seeded generator (mulberry32): the same seed, the same chaos. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
