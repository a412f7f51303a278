/*
 * A limiter per key (an installation): a token bucket for starts and a cap on jobs running at
 * once, in the shape @octokit/plugin-throttling calls its Bottleneck groups with —
 * `group.key(id).schedule(jobOptions, fn, ...args)`. The plugin's own Bottleneck groups cost
 * about 2 ms of CPU per acknowledged webhook (bench/webhook-ack.ts); this does the same arithmetic
 * without Bottleneck's event machinery and heartbeat timers.
 */

export interface LimiterClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): void;
}

export const systemClock: LimiterClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    setTimeout(fn, ms);
  },
};

export interface KeyedLimiterOptions {
  /** One start is added back to a key's allowance this often; 0 for no pacing. */
  intervalMs: number;
  /** Starts an idle key may make at once. */
  burst: number;
  /** Jobs running at once per key. */
  maxConcurrent: number;
}

/** What the plugin passes: a job of weight 0 is a retry that has already waited its turn. */
interface JobOptions {
  weight?: number;
}

interface Waiting {
  start: () => void;
}

interface KeyState {
  tokens: number;
  refilledAt: number;
  running: number;
  pausedUntil: number;
  queue: Waiting[];
  timer: boolean;
}

export interface KeyedLimiter {
  key(id: string): {
    schedule<A extends unknown[], T>(options: JobOptions, fn: (...args: A) => T | Promise<T>, ...args: A): Promise<T>;
  };
  /** Holds a key's new jobs back until `ms` from now. */
  pause(id: string, ms: number): void;
}

export function createKeyedLimiter(options: KeyedLimiterOptions, clock: LimiterClock = systemClock): KeyedLimiter {
  const keys = new Map<string, KeyState>();
  const paced = options.intervalMs > 0;

  const stateOf = (id: string): KeyState => {
    let state = keys.get(id);
    if (!state) {
      state = { tokens: options.burst, refilledAt: clock.now(), running: 0, pausedUntil: 0, queue: [], timer: false };
      keys.set(id, state);
    }
    return state;
  };

  const refill = (state: KeyState, now: number): void => {
    if (!paced) return;
    state.tokens = Math.min(options.burst, state.tokens + (now - state.refilledAt) / options.intervalMs);
    state.refilledAt = now;
  };

  const drain = (id: string, state: KeyState): void => {
    while (state.queue.length > 0 && state.running < options.maxConcurrent) {
      const now = clock.now();
      refill(state, now);
      const wait = Math.max(
        state.pausedUntil - now,
        paced && state.tokens < 1 ? (1 - state.tokens) * options.intervalMs : 0,
      );
      if (wait > 0) {
        if (!state.timer) {
          state.timer = true;
          clock.setTimeout(() => {
            state.timer = false;
            drain(id, state);
          }, Math.ceil(wait));
        }
        return;
      }
      if (paced) state.tokens -= 1;
      state.queue.shift()?.start();
    }
    // A key with nothing to do and a full allowance is forgotten; it starts full next time.
    if (state.queue.length === 0 && state.running === 0 && !state.timer) {
      const now = clock.now();
      refill(state, now);
      if ((!paced || state.tokens >= options.burst) && state.pausedUntil <= now) keys.delete(id);
    }
  };

  return {
    key(id) {
      return {
        schedule(jobOptions, fn, ...args) {
          const state = stateOf(id);
          const run = async () => {
            state.running += 1;
            try {
              return await fn(...args);
            } finally {
              state.running -= 1;
              drain(id, state);
            }
          };
          // Retries waited for GitHub's `retry-after` already; they do not queue behind new work.
          if (jobOptions.weight === 0) return run();
          // Nothing waiting and room to start: start now, without a queue entry (the usual case).
          if (state.queue.length === 0 && state.running < options.maxConcurrent) {
            const now = clock.now();
            refill(state, now);
            if (state.pausedUntil <= now && (!paced || state.tokens >= 1)) {
              if (paced) state.tokens -= 1;
              return run();
            }
          }
          return new Promise((resolve, reject) => {
            state.queue.push({
              start: () => {
                run().then(resolve, reject);
              },
            });
            drain(id, state);
          });
        },
      };
    },
    pause(id, ms) {
      const state = stateOf(id);
      state.pausedUntil = Math.max(state.pausedUntil, clock.now() + ms);
    },
  };
}
