import { AppendWakeups, followJournal, pause, type FollowSource } from "./follow.js";
import {
  DEFAULT_JOURNAL_LIMITS,
  isFinal,
  isOutput,
  type JournalEntry,
  type JournalEvent,
  type JournalLimits,
  type RunJournal,
  type RunState,
  type RunSummary,
} from "./port.js";
import type { RunRequest } from "../request.js";
import { patchFor, reopens, summaryOf } from "./run-summary.js";
import { SharedReads } from "./shared-reads.js";
import {
  isRedisClient,
  openRedis,
  writeAndWait,
  type RedisClient,
  type RedisTarget,
} from "../../store/redis-connection.js";
import { journalNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisJournalOptions {
  /** Where Redis is (the journal opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`<prefix>:journal:…`), so deployments and tests can share a Redis. */
  prefix: string;
  limits?: Partial<JournalLimits>;
  /** How long a run's record outlives its last append, in seconds (default 30 days). */
  ttlSeconds?: number;
  /** How long one blocking read waits before a reader re-checks the run, in ms. */
  blockMs?: number;
  now?: () => Date;
}

/**
 * Records a run only once, atomically: a redelivered `accepted` never resets a run under way.
 * KEYS: run hash. ARGV: ttl, then field/value pairs.
 */
const ACCEPT = new RedisScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
`);

/**
 * Appends one entry and applies its summary patch atomically, so the sequence has no gaps or
 * duplicates however many processes append. Entry ids are `<seq>-0`, which lets a reader block
 * on "anything after seq N" with XREAD. Output goes to its own stream, trimmed from the front to
 * the byte cap; the other events are few and kept (MAXLEN ~ only as a backstop).
 * KEYS: run hash, events stream, output stream, ticks stream (only the seq: what readers block on,
 * so waking them never ships the output itself).
 * ARGV: kind ('output'|'event'), body, bytes, output cap, max events, ttl, final ('1'|'0'),
 * reopens an ended run ('1'|'0'), then patch field/value pairs ('' clears a field).
 * Returns the new seq, or 0 when the entry was not recorded.
 */
const APPEND = new RedisScript(
  `
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 0 end
if (state == 'succeeded' or state == 'failed' or state == 'cancelled' or state == 'interrupted') ` +
    `and ARGV[8] ~= '1' then return 0 end
local bytes = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local maxEvents = tonumber(ARGV[5])
if ARGV[1] == 'event' and ARGV[7] ~= '1' ` +
    `and tonumber(redis.call('HGET', KEYS[1], 'eventsKept') or '0') >= maxEvents then return 0 end
local seq = redis.call('HINCRBY', KEYS[1], 'lastSeq', 1)
local id = seq .. '-0'
if ARGV[1] == 'output' then
  redis.call('XADD', KEYS[3], id, 'e', ARGV[2], 'b', bytes)
  redis.call('HINCRBY', KEYS[1], 'outputBytes', bytes)
  local kept = redis.call('HINCRBY', KEYS[1], 'outputKept', bytes)
  while kept > cap do
    local oldest = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)
    if #oldest == 0 then break end
    local size = tonumber(oldest[1][2][4])
    redis.call('XDEL', KEYS[3], oldest[1][1])
    kept = redis.call('HINCRBY', KEYS[1], 'outputKept', -size)
    redis.call('HINCRBY', KEYS[1], 'outputDropped', size)
  end
else
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxEvents + 100, id, 'e', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'eventsKept', 1)
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', 100, id, 's', seq)
for i = 9, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local ttl = tonumber(ARGV[6])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
redis.call('EXPIRE', KEYS[4], ttl)
return seq
`,
);

type StreamEntry = [id: string, fields: string[]];

interface Watcher {
  connection: RedisClient;
  /** The highest seq seen: the next XREAD blocks for anything after it. */
  cursor: number;
  /** Followers waiting on it now. */
  waiting: number;
}

/**
 * The journal in Redis, for web and worker processes on several machines: a hash per run for its
 * summary, a sorted set (by creation time) for the list, and per run two streams for its log
 * (steps and outcome; output, trimmed to its byte cap) and a small one of bare sequence numbers
 * that readers block on with XREAD. Every key has a TTL and the list is capped at `maxRuns`.
 * A run's keys share a hash tag of its own (`<prefix>:journal:{<run id>}:…`), so a cluster
 * spreads runs over its masters; nothing writes two runs' keys at once.
 */
export class RedisRunJournal implements RunJournal {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly limits: JournalLimits;
  private readonly ttlSeconds: number;
  private readonly blockMs: number;
  private readonly now: () => Date;
  private readonly watchers = new Map<string, Watcher>();
  private readonly wakeups = new AppendWakeups();
  private readonly shared = new SharedReads((runId, afterSeq, limit) => this.events(runId, afterSeq, limit));
  private closed = false;

  constructor(options: RedisJournalOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = journalNamespace(options.prefix);
    this.limits = { ...DEFAULT_JOURNAL_LIMITS, ...options.limits };
    this.ttlSeconds = options.ttlSeconds ?? 30 * 24 * 3600;
    this.blockMs = options.blockMs ?? 5_000;
    this.now = options.now ?? (() => new Date());
  }

  async accepted(request: RunRequest): Promise<void> {
    const now = this.now();
    const summary = summaryOf(request, now.toISOString());
    const fields: Record<string, string | number> = {
      runId: summary.runId,
      owner: summary.repo.owner,
      name: summary.repo.name,
      issueNumber: summary.issue.number,
      issueUrl: summary.issue.url,
      intent: summary.intent,
      requester: summary.requester,
      state: summary.state,
      createdAt: summary.createdAt,
      createdMs: now.getTime(),
      lastSeq: 0,
    };
    const [created] = await ACCEPT.run(
      this.redis,
      [this.key(request.runId, "run")],
      [this.ttlSeconds, ...Object.entries(fields).flat()],
    );
    if (created !== "1") return;
    // The list is another slot than the run's keys on a cluster: a second write, which waits for
    // replicas like the first, so a run acknowledged is listed after a failover.
    await writeAndWait(this.redis, (pipeline) => pipeline.zadd(this.indexKey, now.getTime(), request.runId));
    await this.forgetOldRuns();
  }

  async append(runId: string, event: JournalEvent): Promise<void> {
    const output = isOutput(event);
    const body = JSON.stringify(event);
    const bytes = output ? Buffer.byteLength(event.text) : body.length;
    const patch = Object.entries(patchFor(event)).flatMap(([field, value]) => [field, value ?? ""]);
    await APPEND.call(
      this.redis,
      [this.key(runId, "run"), this.key(runId, "events"), this.key(runId, "output"), this.key(runId, "ticks")],
      [
        output ? "output" : "event",
        body,
        bytes,
        this.limits.maxOutputBytes,
        this.limits.maxEvents,
        this.ttlSeconds,
        isFinal(event) ? "1" : "0",
        reopens(event) ? "1" : "0",
        ...patch,
      ],
    );
  }

  async list(query: { limit: number; before?: string }): Promise<RunSummary[]> {
    const limit = Math.max(0, Math.floor(query.limit));
    if (limit === 0) return [];
    let ids: string[];
    if (query.before === undefined) {
      ids = await this.redis.zrevrangebyscore(this.indexKey, "+inf", "-inf", "LIMIT", 0, limit);
    } else {
      const score = await this.redis.zscore(this.indexKey, query.before);
      if (score === null) return [];
      ids = await this.olderThan(Number(score), query.before, limit);
    }
    // One read per run, all sent at once: on a cluster they go to the runs' own masters (a
    // pipeline would have to go to one).
    const hashes = await Promise.all(ids.map((id) => this.redis.hgetall(this.key(id, "run"))));
    const summaries: RunSummary[] = [];
    const expired: string[] = [];
    hashes.forEach((hash, index) => {
      const summary = toSummary(hash);
      if (summary) summaries.push(summary);
      else expired.push(ids[index] ?? "");
    });
    if (expired.length > 0) await this.redis.zrem(this.indexKey, ...expired);
    return summaries;
  }

  async get(runId: string): Promise<RunSummary | undefined> {
    return toSummary(await this.redis.hgetall(this.key(runId, "run")));
  }

  async events(runId: string, afterSeq: number, limit?: number): Promise<JournalEntry[]> {
    const count = limit !== undefined && Number.isFinite(limit) ? Math.max(1, Math.floor(limit)) : undefined;
    const start = `(${String(afterSeq)}-0`;
    const read = (key: string) =>
      count === undefined ? ["xrange", key, start, "+"] : ["xrange", key, start, "+", "COUNT", String(count)];
    // One transaction, so an append cannot land between the two reads and be skipped.
    const [eventsReply, outputReply] = (
      (await this.redis.multi([read(this.key(runId, "events")), read(this.key(runId, "output"))]).exec()) ?? []
    ).map(([error, reply]) => {
      if (error) throw error;
      return reply as StreamEntry[];
    });
    return mergeStreams(eventsReply ?? [], outputReply ?? [], count);
  }

  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<JournalEntry> {
    return followJournal(this.source, runId, afterSeq, signal);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const watcher of this.watchers.values()) watcher.connection.disconnect();
    this.watchers.clear();
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private readonly source: FollowSource = {
    events: (runId, afterSeq, limit) => this.shared.events(runId, afterSeq, limit ?? 500),
    get: (runId) => this.get(runId),
    waitForMore: async (runId, afterSeq, signal) => {
      const watcher = this.watch(runId, afterSeq);
      watcher.waiting += 1;
      try {
        await this.wakeups.wait(
          runId,
          signal,
          this.blockMs * 2,
          async () => Number(await this.redis.hget(this.key(runId, "run"), "lastSeq")) > afterSeq,
        );
      } finally {
        watcher.waiting -= 1;
      }
    },
  };

  /**
   * One blocked XREAD per followed run in this process, however many viewers follow it: it
   * wakes them all when an entry lands. (A blocked connection serves nobody else, so it is
   * its own; it lingers one block after its last follower, then closes.)
   */
  private watch(runId: string, afterSeq: number): Watcher {
    const existing = this.watchers.get(runId);
    if (existing) {
      existing.cursor = Math.max(existing.cursor, afterSeq);
      return existing;
    }
    const connection = this.redis.duplicate();
    connection.on("error", () => undefined);
    const watcher: Watcher = { connection, cursor: afterSeq, waiting: 0 };
    this.watchers.set(runId, watcher);
    void this.watchLoop(runId, watcher);
    return watcher;
  }

  private async watchLoop(runId: string, watcher: Watcher): Promise<void> {
    const idle = new AbortController();
    try {
      for (;;) {
        const cursor = `${String(watcher.cursor)}-0`;
        let reply: Array<[string, StreamEntry[]]> | null;
        try {
          reply = await watcher.connection.xread(
            "COUNT",
            1,
            "BLOCK",
            this.blockMs,
            "STREAMS",
            this.key(runId, "ticks"),
            cursor,
          );
        } catch {
          if (this.closed) return;
          // Redis hiccuped: try again after a breath, so an outage is not a busy loop.
          await pause(200, idle.signal);
          continue;
        }
        if (reply) {
          for (const [, entries] of reply)
            for (const [id] of entries) watcher.cursor = Math.max(watcher.cursor, Number(id.split("-")[0]));
          this.wakeups.notify(runId);
        } else if (watcher.waiting === 0) {
          return;
        }
      }
    } finally {
      if (this.watchers.get(runId) === watcher) this.watchers.delete(runId);
      watcher.connection.disconnect();
    }
  }

  /** Runs created before the cursor (ties on time broken by id, descending). */
  private async olderThan(score: number, before: string, limit: number): Promise<string[]> {
    const ids: string[] = [];
    for (let offset = 0; ids.length < limit; offset += limit + 16) {
      const page = await this.redis.zrevrangebyscore(
        this.indexKey,
        score,
        "-inf",
        "WITHSCORES",
        "LIMIT",
        offset,
        limit + 16,
      );
      if (page.length === 0) break;
      for (let i = 0; i < page.length && ids.length < limit; i += 2) {
        const id = page[i] ?? "";
        if (Number(page[i + 1]) < score || id < before) ids.push(id);
      }
    }
    return ids;
  }

  private async forgetOldRuns(): Promise<void> {
    const count = await this.redis.zcard(this.indexKey);
    if (count <= this.limits.maxRuns) return;
    const oldest = await this.redis.zrange(this.indexKey, 0, count - this.limits.maxRuns - 1);
    if (oldest.length === 0) return;
    // A DEL per run: each run's keys share a slot, different runs' need not.
    await Promise.all(
      oldest.map((id) =>
        this.redis.del(this.key(id, "run"), this.key(id, "events"), this.key(id, "output"), this.key(id, "ticks")),
      ),
    );
    await this.redis.zrem(this.indexKey, ...oldest);
  }

  private get indexKey(): string {
    return `${this.prefix}:runs`;
  }

  /** A run's keys share a hash tag, so the append script's keys sit in one cluster slot. */
  private key(runId: string, part: "run" | "events" | "output" | "ticks"): string {
    return `${this.prefix}:{${runId}}:${part}`;
  }
}

/** Both streams' entries in seq order. With a count, only up to where both reads are complete. */
function mergeStreams(
  events: readonly StreamEntry[],
  output: readonly StreamEntry[],
  count: number | undefined,
): JournalEntry[] {
  const parse = (entries: readonly StreamEntry[]): JournalEntry[] =>
    entries.map(([id, fields]) => ({
      seq: Number(id.split("-")[0]),
      event: JSON.parse(fields[fields.indexOf("e") + 1] ?? "null") as JournalEvent,
    }));
  const a = parse(events);
  const b = parse(output);
  // A read that hit its count may have more after its last entry: nothing past that is certain.
  let horizon = Number.POSITIVE_INFINITY;
  if (count !== undefined && a.length >= count) horizon = Math.min(horizon, a.at(-1)?.seq ?? horizon);
  if (count !== undefined && b.length >= count) horizon = Math.min(horizon, b.at(-1)?.seq ?? horizon);
  const merged = [...a, ...b].filter((entry) => entry.seq <= horizon).sort((x, y) => x.seq - y.seq);
  return count === undefined ? merged : merged.slice(0, count);
}

const STATES: ReadonlySet<string> = new Set<RunState>([
  "queued",
  "running",
  "succeeded",
  "failed",
  "cancelled",
  "interrupted",
  "paused",
]);

function toSummary(hash: Record<string, string>): RunSummary | undefined {
  const { runId, owner, name, state, createdAt } = hash;
  if (
    runId === undefined ||
    owner === undefined ||
    name === undefined ||
    state === undefined ||
    createdAt === undefined ||
    !STATES.has(state)
  )
    return undefined;
  const optional = (field: string): string | undefined =>
    hash[field] === undefined || hash[field] === "" ? undefined : hash[field];
  const startedAt = optional("startedAt");
  const finishedAt = optional("finishedAt");
  const prUrl = optional("prUrl");
  const error = optional("error");
  const errorKind = optional("errorKind");
  const remedy = optional("remedy");
  return {
    runId,
    repo: { owner, name },
    issue: { number: Number(hash["issueNumber"] ?? 0), url: hash["issueUrl"] ?? "" },
    intent: hash["intent"] ?? "",
    requester: hash["requester"] ?? "",
    state: state as RunState,
    createdAt,
    ...(startedAt ? { startedAt } : {}),
    ...(finishedAt ? { finishedAt } : {}),
    ...(prUrl ? { prUrl } : {}),
    ...(error ? { error } : {}),
    ...(errorKind ? { errorKind } : {}),
    ...(remedy ? { remedy } : {}),
    lastSeq: Number(hash["lastSeq"] ?? 0),
    outputBytes: Number(hash["outputBytes"] ?? 0),
    outputDroppedBytes: Number(hash["outputDropped"] ?? 0),
  };
}
