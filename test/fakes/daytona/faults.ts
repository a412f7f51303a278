/** Which requests a fault applies to. */
export interface FaultMatcher {
  /** HTTP method (case-insensitive); WebSocket upgrades are `GET`. Any when absent. */
  method?: string;
  /** A RegExp tested against the path (no query), or a string the path must contain. Any when absent. */
  pathPattern?: string | RegExp;
  /** How many matching requests to affect; unlimited when absent. */
  times?: number;
  /** Affect only every n-th matching request, letting the others through (a share, 1/n, failing). 1 when absent. */
  every?: number;
}

export type Fault =
  /** Answer with this status and JSON body (default body `{statusCode, message: 'injected fault'}`). */
  | { status: number; body?: unknown; headers?: Record<string, string> }
  /** Never answer (until `close()`): a server that hangs, so client timeouts fire. */
  | { hang: true }
  /** Destroy the TCP connection without answering: a reset (the SDK retries this for GET/PUT/DELETE only). */
  | { destroySocket: true }
  /** Add this much latency to the matching requests only, then handle them normally. */
  | { delayMs: number };

export interface FaultHandle {
  /** Requests this fault has affected so far. */
  readonly hits: number;
  remove(): void;
}

interface Entry {
  matcher: FaultMatcher;
  fault: Fault;
  hits: number;
  /** Matching requests seen, affected or let through (for `every`). */
  seen: number;
}

export class FaultRegistry {
  private entries: Entry[] = [];

  add(matcher: FaultMatcher, fault: Fault): FaultHandle {
    const entry: Entry = { matcher, fault, hits: 0, seen: 0 };
    this.entries.push(entry);
    return {
      get hits() {
        return entry.hits;
      },
      remove: () => {
        this.entries = this.entries.filter((e) => e !== entry);
      },
    };
  }

  clear(): void {
    this.entries = [];
  }

  /** The first live fault matching this request, counting it as used. */
  take(method: string, path: string): Fault | undefined {
    for (const entry of this.entries) {
      const { matcher } = entry;
      if (matcher.times !== undefined && entry.hits >= matcher.times) continue;
      if (matcher.method !== undefined && matcher.method.toUpperCase() !== method.toUpperCase()) continue;
      const pattern = matcher.pathPattern;
      if (pattern !== undefined && !(typeof pattern === "string" ? path.includes(pattern) : pattern.test(path)))
        continue;
      entry.seen += 1;
      if (entry.seen % Math.max(1, matcher.every ?? 1) !== 0) continue;
      entry.hits += 1;
      return entry.fault;
    }
    return undefined;
  }
}

export function describeFault(fault: Fault): string {
  if ("status" in fault) return `status ${String(fault.status)}`;
  if ("hang" in fault) return "hang";
  if ("destroySocket" in fault) return "destroySocket";
  return `delay ${String(fault.delayMs)}ms`;
}
