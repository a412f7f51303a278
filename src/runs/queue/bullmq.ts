import { createHash } from "node:crypto";
import { DelayedError, Queue, Worker, type Job } from "bullmq";
import { queueLimits } from "./quota.js";
import { issueKey, type RunRequest } from "../request.js";
import type {
  AcknowledgingRun,
  DurableQueueOptions,
  EnqueueOutcome,
  QueueLimits,
  QueueRefusal,
  QueueStats,
  RunProcessor,
  RunQueue,
} from "./port.js";
import { HeldRuns, interruptReason, newWorkerId } from "./attempt.js";
import { openRedis, type RedisClient, type RedisTarget } from "../../store/redis-connection.js";
import { queueNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface BullmqQueueOptions extends DurableQueueOptions {
  /** Where Redis is: one node, a cluster or a master behind sentinels (a string is one node's URL). */
  redis: RedisTarget | string;
  /**
   * Namespaces every key (`HARNESS_REDIS_PREFIX`), so deployments and tests can share a Redis.
   * Keys go under `{<prefix>}`, one hash tag for BullMQ's keys and the queue's own records.
   */
  prefix?: string;
  /**
   * How long a run queued behind another on its issue waits before looking again, in ms (it is
   * also woken when the issue frees up).
   */
  waitPollMs?: number;
  /** How long dedup keys and finished run records are kept, in seconds (redeliveries within it are recognised). */
  retentionSeconds?: number;
  /** Redis connection trouble (outages are retried; this is for the log). */
  onConnectionError?: (error: Error) => void;
}

/** Identifiers only: the run, and the issue whose line it waits in (its keys need no lookup). */
interface JobData {
  runId: string;
  issue: string;
}

/** Finished jobs go soon: dedup lives in our own keys, not in BullMQ's job ids. */
const JOB_RETENTION = { removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 7 * 24 * 3600 } };

const QUEUE_NAME = "runs";
const THIRTY_DAYS_S = 30 * 24 * 3600;

/**
 * Accepts a request once: dedup on the semantic key (and on the delivery id for comments), the
 * quotas (the issue's line, the repository's and installation's waiting runs), the run record,
 * its place in the issue's line and its fair order — all in one step, so two web processes
 * racing cannot both accept a redelivery or both take a quota's last place. With ARGV[8] = '1'
 * it only answers what it would do.
 * KEYS: key, delivery, issue line, run, active set, repository queued, installation queued,
 * installation running, fair order (zset), sequence.
 * ARGV: run id, request, created ms, is comment, retention, issue key, job id, dry run,
 * repository queued cap, installation queued cap, repository id, installation id, and (for a
 * dry run) the runs this process is acknowledging, counted unless their record exists.
 * Fair order: score = rank * 2^32 + sequence, rank = 1 + the installation's live runs.
 * The acknowledged runs' keys are built in the script; they share the queue's hash tag.
 */
const ENQUEUE = new RedisScript(
  `
local existing = redis.call('GET', KEYS[1])
if existing then return {'duplicate', existing} end
if ARGV[4] == '1' then
  local byDelivery = redis.call('GET', KEYS[2])
  if byDelivery then return {'duplicate', byDelivery} end
end
local issueRuns = redis.call('LRANGE', KEYS[3], 0, -1)
local repoQueued = redis.call('SCARD', KEYS[6])
local instQueued = redis.call('SCARD', KEYS[7])
for entry in string.gmatch(ARGV[13] or '', '[^;]+') do
  local runKey, runId, sameIssue, sameRepo, sameInst = string.match(entry, '^(.+)|([^|]+)|(%d)|(%d)|(%d)$')
  if runKey and redis.call('EXISTS', runKey) == 0 then
    if sameIssue == '1' then table.insert(issueRuns, runId) end
    if sameRepo == '1' then repoQueued = repoQueued + 1 end
    if sameInst == '1' then instQueued = instQueued + 1 end
  end
end
if #issueRuns >= 2 then return {'refused', 'issue_busy', '1', issueRuns[#issueRuns]} end
local repoCap = tonumber(ARGV[9])
if repoCap > 0 and repoQueued >= repoCap then return {'refused', 'repository_full', ARGV[9], ''} end
local installationCap = tonumber(ARGV[10])
if installationCap > 0 and instQueued >= installationCap then return ` +
    `{'refused', 'installation_full', ARGV[10], ''} end
local rank = math.min(redis.call('SCARD', KEYS[7]) + redis.call('SCARD', KEYS[8]) + 1, 1000000)
local behind = issueRuns[1]
local ahead = redis.call('ZCOUNT', KEYS[9], '-inf', '(' .. string.format('%.0f', (rank + 1) * 4294967296))
if ARGV[8] == '1' then
  if behind then return {'waiting', behind, tostring(rank)} end
  return {'queued', tostring(ahead), tostring(rank)}
end
local score = string.format('%.0f', rank * 4294967296 + redis.call('INCR', KEYS[10]))
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[5], 'NX')
redis.call('RPUSH', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[4], 'request', ARGV[2], 'state', 'queued', 'attempts', 0, 'cancel', 0, ` +
    `'created_at', ARGV[3], 'issue', ARGV[6], 'job', ARGV[7], ` +
    `'repo', ARGV[11], 'inst', ARGV[12], 'score', score)
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('SADD', KEYS[6], ARGV[1])
redis.call('SADD', KEYS[7], ARGV[1])
redis.call('ZADD', KEYS[9], score, ARGV[1])
if behind then return {'waiting', behind, tostring(rank)} end
return {'queued', tostring(ahead), tostring(rank)}
`,
);

/**
 * The quota sets of a run, from the identifiers its record holds (records from before quotas
 * carry none and count under 0). Shared by the scripts below.
 */
const QUOTA_KEYS =
  `
local function quotaKeys(base, run)
  local repo = redis.call('HGET', run, 'repo') or '0'
  local inst = redis.call('HGET', run, 'inst') or '0'
  return base .. 'repo:' .. repo .. ':queued', base .. 'inst:' .. inst .. ':queued', ` +
  `base .. 'repo:' .. repo .. ':running', base .. 'inst:' .. inst .. ':running', inst
end
`;

/**
 * A worker takes a run only if it is still live, first in its issue's line and, when it has
 * not started yet, within its repository's and installation's running caps; each start counts
 * as an attempt, so a run whose workers keep dying is eventually given up.
 * KEYS: run, issue line, fair order. ARGV: run id, worker id, now, key base, repository running
 * cap, installation running cap.
 */
const CLAIM = new RedisScript(
  `${QUOTA_KEYS}
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing'} end
if state ~= 'queued' and state ~= 'running' then return {'terminal', state} end
local head = redis.call('LINDEX', KEYS[2], 0)
if head ~= ARGV[1] then return {'wait', head or ''} end
local repoQueued, instQueued, repoRunning, instRunning, inst = quotaKeys(ARGV[4], KEYS[1])
if state == 'queued' then
  local repoCap = tonumber(ARGV[5])
  local installationCap = tonumber(ARGV[6])
  if (repoCap > 0 and redis.call('SCARD', repoRunning) >= repoCap) or ` +
    `(installationCap > 0 and redis.call('SCARD', instRunning) >= installationCap) then
    return {'capped', inst}
  end
end
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'state', 'running', 'owner', ARGV[2], 'heartbeat', ARGV[3])
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[3])
redis.call('SREM', repoQueued, ARGV[1])
redis.call('SREM', instQueued, ARGV[1])
redis.call('SADD', repoRunning, ARGV[1])
redis.call('SADD', instRunning, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return {'run', tostring(attempts), redis.call('HGET', KEYS[1], 'cancel'), redis.call('HGET', KEYS[1], 'request')}
`,
);

/**
 * Ends a run once: the first terminal state wins (a cancel racing a finishing run cannot make a
 * second one), its quota places free up, the issue's line moves on, and the next run in it is
 * returned to be woken, with the installation whose capped runs may now start.
 * KEYS: run, issue line, active set, fair order.
 */
const FINISH = new RedisScript(`${QUOTA_KEYS}
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'running' and state ~= 'queued' then return {'already', state or ''} end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[5] then return {'lost', ''} end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'finished_at', ARGV[3], 'error', ARGV[4])
redis.call('HDEL', KEYS[1], 'owner')
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
local repoQueued, instQueued, repoRunning, instRunning, inst = quotaKeys(ARGV[8], KEYS[1])
redis.call('SREM', repoQueued, ARGV[1])
redis.call('SREM', instQueued, ARGV[1])
redis.call('SREM', repoRunning, ARGV[1])
redis.call('SREM', instRunning, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then return {'ok', '', '', inst} end
return {'ok', head, redis.call('HGET', ARGV[7] .. head, 'job') or '', inst}
`);

/** Flags the active run of an issue for cancellation, if it is still the active one and live. */
const CANCEL = new RedisScript(`
if redis.call('LINDEX', KEYS[1], 0) ~= ARGV[1] then return {'moved'} end
local state = redis.call('HGET', KEYS[2], 'state')
if state ~= 'queued' and state ~= 'running' then return {'ended'} end
redis.call('HSET', KEYS[2], 'cancel', 1)
return {'ok', state}
`);

/**
 * A run handed back at shutdown: it goes back to the line (and its fair place) without
 * counting as an attempt. KEYS: run, fair order. ARGV: worker id, key base, run id.
 */
const HAND_BACK = new RedisScript(`${QUOTA_KEYS}
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {'lost'} end
redis.call('HSET', KEYS[1], 'state', 'queued')
redis.call('HDEL', KEYS[1], 'owner')
redis.call('HINCRBY', KEYS[1], 'attempts', -1)
local repoQueued, instQueued, repoRunning, instRunning = quotaKeys(ARGV[2], KEYS[1])
redis.call('SREM', repoRunning, ARGV[3])
redis.call('SREM', instRunning, ARGV[3])
redis.call('SADD', repoQueued, ARGV[3])
redis.call('SADD', instQueued, ARGV[3])
local score = redis.call('HGET', KEYS[1], 'score')
if score then redis.call('ZADD', KEYS[2], score, ARGV[3]) end
return {'ok'}
`);

/**
 * The durable run queue on Redis with BullMQ, for many web and worker processes. BullMQ moves
 * jobs between workers, renews their locks and puts stalled ones back; the run records, dedup
 * keys and per-issue lines live in our own keys, so both queue adapters behave the same:
 * each request key runs once however often it is delivered (for `retentionSeconds`), one run per
 * issue is active at a time, a run whose worker died is started again until its attempts are
 * spent and then given up as interrupted, and `maxInFlight` caps runs across the whole cluster.
 * Job data is the run id only; requests hold no token.
 */
export class BullmqRunQueue implements RunQueue {
  private readonly redis: RedisClient;
  private readonly queue: Queue<JobData>;
  private readonly worker: Worker<JobData> | undefined;
  /** The worker's own connection: BullMQ takes it as shared and leaves closing it to us. */
  private readonly workerRedis: RedisClient | undefined;
  private readonly prefix: string;
  private readonly workerId: string;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly maxAttempts: number;
  private readonly limits: QueueLimits;
  private readonly waitPollMs: number;
  private readonly retention: number;
  private readonly held: HeldRuns;
  private readonly reconciler: NodeJS.Timeout | undefined;
  private readonly ready: Promise<void>;
  private closed = false;

  constructor(
    private readonly processor: RunProcessor,
    private readonly options: BullmqQueueOptions,
  ) {
    // BullMQ's prefix and the root of the queue's own keys: one hash tag, so BullMQ's scripts and
    // ours each find all their keys on one node of a cluster.
    this.prefix = queueNamespace(options.prefix ?? "harness");
    this.workerId = options.workerId ?? newWorkerId();
    this.concurrency = options.concurrency ?? 2;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.maxAttempts = options.maxAttempts ?? 3;
    this.waitPollMs = options.waitPollMs ?? 5_000;
    this.retention = options.retentionSeconds ?? THIRTY_DAYS_S;
    this.limits = queueLimits(options.limits);
    this.held = new HeldRuns(processor, options.onError ? { onError: options.onError } : {});
    const onError = (error: Error): void => {
      options.onConnectionError?.(error);
    };
    // Commands wait through a Redis outage instead of failing, so a run in progress carries on
    // and its bookkeeping lands once Redis is back (BullMQ's workers need the same setting).
    this.redis = openRedis(options.redis, { maxRetriesPerRequest: null });
    this.redis.on("error", onError);
    this.queue = new Queue<JobData>(QUEUE_NAME, { connection: this.redis, prefix: this.prefix });
    this.queue.on("error", onError);
    if (this.concurrency > 0) {
      this.workerRedis = openRedis(options.redis, { maxRetriesPerRequest: null });
      this.worker = new Worker<JobData>(QUEUE_NAME, async (job, token) => this.process(job, token), {
        connection: this.workerRedis,
        prefix: this.prefix,
        concurrency: this.concurrency,
        lockDuration: this.leaseMs,
        stalledInterval: this.leaseMs,
        // Our own attempt count decides when a run is given up (and says so on the issue);
        // BullMQ failing a job silently after one stall would leave the issue without an answer.
        maxStalledCount: this.maxAttempts + 1,
        autorun: true,
      });
      this.worker.on("error", onError);
      this.worker.on("failed", (job, error) => {
        if (job) this.onJobFailed(job, error);
      });
      // The cap is a setting of the shared queue: every worker applies the one it was given.
      const cap = options.maxInFlight ?? 0;
      this.ready = (cap > 0 ? this.queue.setGlobalConcurrency(cap) : this.queue.removeGlobalConcurrency()).then(
        () => undefined,
      );
      this.reconciler = setInterval(
        () => {
          void this.reconcile();
        },
        Math.max(1_000, this.leaseMs),
      );
      this.reconciler.unref();
    } else {
      this.ready = Promise.resolve();
    }
  }

  async enqueue(request: RunRequest): Promise<EnqueueOutcome> {
    if (this.closed) throw new Error("The run queue is shutting down");
    const jobId = jobIdFor(request.key);
    const reply = await this.runEnqueue(request, jobId, false);
    const outcome = outcomeOf(reply);
    if (outcome.status === "queued" || outcome.status === "waiting") {
      // The job id comes from the request key too, so even a repeated add cannot make two jobs.
      // Its priority is its fair rank: BullMQ starts lower numbers first, FIFO within one.
      await this.queue.add(
        "run",
        { runId: request.runId, issue: issueKey(request) },
        { jobId, priority: priorityOf(reply), ...JOB_RETENTION },
      );
    }
    return outcome;
  }

  async admission(request: RunRequest, acknowledging: readonly AcknowledgingRun[] = []): Promise<EnqueueOutcome> {
    // Each as `run key|run id|same issue|same repository|same installation`: the script counts
    // those the queue does not hold yet.
    const others = acknowledging
      .filter((run) => run.runId !== request.runId && !/[|;]/.test(run.runId))
      .map((run) =>
        [
          this.k("run", run.runId),
          run.runId,
          run.issueKey === issueKey(request) ? "1" : "0",
          run.repoId === request.repo.id ? "1" : "0",
          run.installationId === request.installationId ? "1" : "0",
        ].join("|"),
      );
    return outcomeOf(await this.runEnqueue(request, jobIdFor(request.key), true, others.join(";")));
  }

  private runEnqueue(request: RunRequest, jobId: string, dryRun: boolean, acknowledging = ""): Promise<string[]> {
    const installation = String(request.installationId);
    const repository = String(request.repo.id);
    return ENQUEUE.run(
      this.redis,
      [
        this.k("key", request.key),
        this.k("delivery", request.deliveryId),
        this.k("issue", issueKey(request)),
        this.k("run", request.runId),
        this.k("active"),
        this.k("repo", `${repository}:queued`),
        this.k("inst", `${installation}:queued`),
        this.k("inst", `${installation}:running`),
        this.k("order"),
        this.k("seq"),
      ],
      [
        request.runId,
        JSON.stringify(request),
        Date.now(),
        request.trigger.kind === "comment" ? "1" : "0",
        this.retention,
        issueKey(request),
        jobId,
        dryRun ? "1" : "0",
        this.limits.maxQueuedPerRepository,
        this.limits.maxQueuedPerInstallation,
        repository,
        installation,
        acknowledging,
      ],
    );
  }

  async seen(key: string): Promise<boolean> {
    return (await this.redis.exists(this.k("key", key))) === 1;
  }

  async activeRun(key: string): Promise<string | undefined> {
    return (await this.redis.lindex(this.k("issue", key), 0)) ?? undefined;
  }

  /**
   * Flags the active run of an issue. A queued run reaches its worker already aborted (so it says
   * ⏹); a running one is aborted here at once, or by its worker's next heartbeat elsewhere.
   */
  async cancel(key: string): Promise<boolean> {
    for (let tries = 0; tries < 3; tries += 1) {
      const head = await this.redis.lindex(this.k("issue", key), 0);
      if (!head) return false;
      const [outcome] = await CANCEL.run(this.redis, [this.k("issue", key), this.k("run", head)], [head]);
      if (outcome === "ok") {
        this.held.abort(head);
        await this.wake(head);
        return true;
      }
      if (outcome === "ended") return false;
    }
    return false;
  }

  async stats(): Promise<QueueStats> {
    const counts = await this.queue.getJobCounts("waiting", "delayed", "prioritized", "active");
    return {
      queued: (counts["waiting"] ?? 0) + (counts["delayed"] ?? 0) + (counts["prioritized"] ?? 0),
      running: counts["active"] ?? 0,
    };
  }

  async activeRunIds(): Promise<Set<string>> {
    return new Set(await this.redis.smembers(this.k("active")));
  }

  /** Resolves once nothing runs here and, for a worker, nothing is left that it could run. */
  async idle(): Promise<void> {
    await this.ready;
    for (;;) {
      await this.held.settled();
      if (this.concurrency === 0) return;
      // Runs held by other workers end there: only the shared store can say when all have.
      if ((await this.redis.scard(this.k("active"))) === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async close(graceMs = 30_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.reconciler) clearInterval(this.reconciler);
    // The worker stops fetching while the runs it holds finish (or are handed back).
    const closingWorker = this.worker?.close();
    await this.held.drain(graceMs);
    await closingWorker?.catch(() => undefined);
    // Not the worker's disconnect(): on a cluster it can wait for an end that never comes.
    this.workerRedis?.disconnect();
    await this.queue.close().catch(() => undefined);
    this.redis.disconnect();
  }

  private k(kind: "key" | "delivery" | "issue" | "run" | "repo" | "inst", id: string): string;
  private k(kind: "active" | "order" | "seq"): string;
  private k(kind: string, id?: string): string {
    return id === undefined ? `${this.prefix}:h:${kind}` : `${this.prefix}:h:${kind}:${id}`;
  }

  private async process(job: Job<JobData>, token: string | undefined): Promise<void> {
    const { runId, issue } = job.data;
    const [outcome = "", detail = "0", cancelFlag = "0", requestText = ""] = await CLAIM.run(
      this.redis,
      [this.k("run", runId), this.k("issue", issue), this.k("order")],
      [
        runId,
        this.workerId,
        Date.now(),
        this.keyBase,
        this.limits.maxRunningPerRepository,
        this.limits.maxRunningPerInstallation,
      ],
    );
    if (outcome === "missing" || outcome === "terminal") return;
    if (outcome === "capped") {
      // Its repository or installation runs as many as it may: step aside until one of them
      // ends (which wakes it) or the wait lapses.
      await this.redis.sadd(this.k("inst", `${detail}:capped`), job.id ?? "");
      await job.moveToDelayed(Date.now() + this.waitPollMs, token);
      throw new DelayedError();
    }
    if (outcome === "wait") {
      // Behind another run on the same issue: step aside, to be woken when the issue frees up.
      await job.moveToDelayed(Date.now() + this.waitPollMs, token);
      throw new DelayedError();
    }
    const request = JSON.parse(requestText) as RunRequest;
    const attempts = Number(detail);
    if (attempts > this.maxAttempts || (attempts > 1 && cancelFlag === "1")) {
      const reason = interruptReason(attempts - 1, cancelFlag === "1");
      const [given] = await this.finish(runId, issue, "interrupted", reason);
      if (given === "ok") await this.options.onInterrupted?.(request, reason).catch(() => undefined);
      return;
    }
    const ended = await this.held.attempt(request, {
      cancelRequested: cancelFlag === "1",
      // Carries cancellations made by other processes (BullMQ renews the job's lock itself).
      heartbeat: async () => (await this.redis.hget(this.k("run", runId), "cancel")) === "1",
      heartbeatMs: Math.max(100, Math.min(1_000, Math.floor(this.leaseMs / 3))),
    });
    if (ended.kind === "threw") {
      await this.finish(runId, issue, "done", String(ended.error));
      return;
    }
    if (ended.kind === "handed-back") {
      await HAND_BACK.run(this.redis, [this.k("run", runId), this.k("order")], [this.workerId, this.keyBase, runId]);
      await job.moveToDelayed(Date.now(), token);
      throw new DelayedError();
    }
    await this.finish(runId, issue, ended.kind);
  }

  /** Records the run's end (first one wins) and wakes the next run on the same issue. */
  private async finish(
    runId: string,
    issue: string,
    state: "done" | "cancelled" | "interrupted",
    error = "",
  ): Promise<string[]> {
    const result = await FINISH.run(
      this.redis,
      [this.k("run", runId), this.k("issue", issue), this.k("active"), this.k("order")],
      [
        runId,
        state,
        Date.now(),
        error,
        state === "interrupted" ? "" : this.workerId,
        this.retention,
        `${this.prefix}:h:run:`,
        this.keyBase,
      ],
    );
    const [outcome, , nextJob, installation] = result;
    if (nextJob) await this.promote(nextJob);
    if (outcome === "ok" && installation) await this.wakeCapped(installation);
    return result;
  }

  /** Runs of an installation that stepped aside for a cap: one place is free, they try again. */
  private async wakeCapped(installation: string): Promise<void> {
    const key = this.k("inst", `${installation}:capped`);
    const [[, jobIds]] = ((await this.redis.multi().smembers(key).del(key).exec()) ?? [[null, []]]) as [
      [unknown, string[]],
    ];
    for (const jobId of jobIds) await this.promote(jobId);
  }

  private get keyBase(): string {
    return `${this.prefix}:h:`;
  }

  /** Starts a delayed job now (a run waiting its issue's turn, or a cancelled one). */
  private async wake(runId: string): Promise<void> {
    const jobId = await this.redis.hget(this.k("run", runId), "job");
    if (jobId) await this.promote(jobId);
  }

  private async promote(jobId: string): Promise<void> {
    const job = await this.queue.getJob(jobId);
    if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
  }

  /** A job BullMQ gave up on (too many stalls) still ends on the issue, never silently. */
  private onJobFailed(job: Job<JobData>, error: Error): void {
    if (error instanceof DelayedError) return;
    void this.reconcileRun(job.data.runId).catch(() => undefined);
    this.options.onConnectionError?.(error);
  }

  /**
   * The watchdog: every live run record must have a live job. A job lost between recording and
   * queueing (Redis went away), or failed by BullMQ, is queued again under the same id; its
   * attempt count still bounds how often it can start.
   */
  private async reconcile(): Promise<void> {
    if (this.closed) return;
    try {
      for (const runId of await this.redis.smembers(this.k("active"))) await this.reconcileRun(runId);
    } catch (error) {
      if (error instanceof Error) this.options.onConnectionError?.(error);
    }
  }

  private async reconcileRun(runId: string): Promise<void> {
    if (this.held.has(runId)) return;
    const [state, jobId, issue] = await this.redis.hmget(this.k("run", runId), "state", "job", "issue");
    if (!jobId || !issue || (state !== "queued" && state !== "running")) return;
    const job = await this.queue.getJob(jobId);
    const jobState = job ? await job.getState() : "missing";
    if (jobState === "completed" || jobState === "failed") await job?.remove().catch(() => undefined);
    if (jobState === "completed" || jobState === "failed" || jobState === "missing" || jobState === "unknown") {
      await this.queue.add("run", { runId, issue }, { jobId, ...JOB_RETENTION });
    }
  }
}

/** The enqueue script's answer as the port's outcome. */
function outcomeOf(reply: readonly string[]): EnqueueOutcome {
  const [status = "", first = "", second = "", third = ""] = reply;
  if (status === "duplicate") return { status: "duplicate", runId: first };
  if (status === "waiting") return { status: "waiting", behind: first };
  if (status === "refused")
    return {
      status: "refused",
      reason: first as QueueRefusal["reason"],
      limit: Number(second),
      ...(third ? { active: third } : {}),
    };
  return { status: "queued", ahead: Number(first) };
}

/** BullMQ takes priorities up to 2,097,151; ranks beyond that share the last one. */
function priorityOf(reply: readonly string[]): number {
  return Math.min(Math.max(1, Number(reply[2] ?? "1") || 1), 2_097_151);
}

/** BullMQ job ids may not contain ":" or be all digits: a hash of the request key is neither. */
function jobIdFor(key: string): string {
  return `r-${createHash("sha256").update(key).digest("hex").slice(0, 40)}`;
}
