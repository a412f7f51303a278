import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import { RunStoreError } from "../../store/run-store-error.js";
import { HeldRuns, interruptReason, newWorkerId, type AttemptOutcome } from "./attempt.js";
import { judgeOwner, machineProbes, ownProof, readProof, type LivenessProbes, type OwnerProof } from "./liveness.js";
import { lockFree, OwnerLock, ownerLockDir, sweepOwnerLocks } from "./owner-lock.js";
import { IdleSignal } from "../../util/idle.js";
import { openSqliteFile } from "../../store/sqlite-file.js";
import { queueLimits, refusalFor, withAcknowledging } from "./quota.js";
import { issueKey, type RunRequest } from "../request.js";
import type {
  AcknowledgingRun,
  DurableQueueOptions,
  EnqueueOutcome,
  QueueLimits,
  QueueStats,
  RunProcessor,
  RunQueue,
} from "./port.js";

export interface SqliteQueueOptions extends DurableQueueOptions {
  /** Database file (`HARNESS_DB`); `:memory:` for tests. */
  path: string;
  /** How often idle workers look for work, in ms. */
  pollMs?: number;
  /** Wait before a retried attempt, in ms (doubled per attempt). */
  backoffMs?: number;
  /** The store failed a poll (busy past its timeout, disk trouble); the next poll tries again. */
  onStoreError?: (error: unknown) => void;
  now?: () => number;
  /**
   * What proves a claim's owner gone (default: this machine's `/proc` and the lock files next
   * to the store). Tests inject their own.
   */
  liveness?: LivenessProbes;
}

type RunState = "queued" | "running" | "done" | "cancelled" | "interrupted";

interface RunRow {
  run_id: string;
  key: string;
  issue_key: string;
  request: string;
  state: RunState;
  attempts: number;
  available_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  cancel_requested: number;
  lease_proof: string | null;
}

/**
 * The active run of an issue: the running one, else the oldest queued. Two requests accepted in
 * the same millisecond are told apart by insertion order (rowid), never left to chance.
 */
const ISSUE_ORDER = "ORDER BY (state = 'running') DESC, created_at, rowid";

/** How often a worker looks for lock files left by dead processes, in ms. */
const LOCK_SWEEP_MS = 10 * 60_000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  delivery_id TEXT NOT NULL,
  issue_key TEXT NOT NULL,
  request TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  available_at INTEGER NOT NULL,
  lease_owner TEXT,
  lease_until INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER,
  last_error TEXT
);
CREATE INDEX IF NOT EXISTS runs_claimable ON runs (state, available_at, created_at);
CREATE INDEX IF NOT EXISTS runs_issue ON runs (issue_key, state);
CREATE TABLE IF NOT EXISTS deliveries (
  delivery_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  received_at INTEGER NOT NULL
);
`;

/**
 * Columns added after the first release: a store written by an older version gains them on
 * open, filled from the requests it already holds.
 */
const QUOTA_COLUMNS =
  `
ALTER TABLE runs ADD COLUMN repo_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN installation_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN rank INTEGER NOT NULL DEFAULT 1;
UPDATE runs SET repo_id = COALESCE(json_extract(request, '$.repo.id'), 0), ` +
  `installation_id = COALESCE(json_extract(request, '$.installationId'), 0);
`;

/** Added with the liveness proof; claims made before it carry none and follow the lease rule. */
const PROOF_COLUMN = "ALTER TABLE runs ADD COLUMN lease_proof TEXT";

const QUOTA_INDEXES = `
CREATE INDEX IF NOT EXISTS runs_repository ON runs (repo_id, state);
CREATE INDEX IF NOT EXISTS runs_installation ON runs (installation_id, state);
`;

function hasColumn(db: Database.Database, name: string): boolean {
  return (db.prepare("PRAGMA table_info(runs)").all() as Array<{ name: string }>).some(
    (column) => column.name === name,
  );
}

function migrate(db: Database.Database): void {
  const columns = new Set(
    (db.prepare("PRAGMA table_info(runs)").all() as Array<{ name: string }>).map((column) => column.name),
  );
  if (!columns.has("rank"))
    db.transaction(() => {
      db.exec(QUOTA_COLUMNS);
    }).immediate();
  if (!columns.has("lease_proof"))
    db.transaction(() => {
      // Looked at again under the write lock: another process opening the same store may have added it.
      if (!hasColumn(db, "lease_proof")) db.exec(PROOF_COLUMN);
    }).immediate();
  db.exec(QUOTA_INDEXES);
}

/**
 * A durable run queue in one SQLite file (WAL): requests survive restarts and crashes, each
 * request key runs once however often it is delivered, one run per issue is active at a time,
 * claimed runs hold a lease renewed by heartbeats, and a run whose worker died is retried (with
 * backoff) until its attempts are spent, then given up as interrupted — never left silent. A
 * worker that provably died on this machine (liveness.ts) is not waited for: its runs are taken
 * back as soon as another process looks, typically the same one restarted.
 * No token is ever stored: requests hold identifiers and text only.
 */
export class SqliteRunQueue implements RunQueue {
  private readonly db: Database.Database;
  private readonly workerId: string;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly now: () => number;
  private readonly limits: QueueLimits;
  private readonly held: HeldRuns;
  // A web-only process (concurrency 0) runs nothing, so it is idle whenever it holds nothing.
  private readonly idleSignal = new IdleSignal(
    () => this.held.size === 0 && (this.concurrency === 0 || !this.hasClaimable()),
  );
  private poller: NodeJS.Timeout | undefined;
  private readonly checkpointer: NodeJS.Timeout;
  private closed = false;
  private readonly probes: LivenessProbes;
  private readonly lock: OwnerLock | undefined;
  private readonly lockDir: string | undefined;
  /** Recorded with each claim (see liveness.ts); null when this process can prove nothing. */
  private readonly proof: OwnerProof | undefined;
  private readonly proofText: string | null;
  private sweptAt: number | undefined;

  constructor(
    private readonly processor: RunProcessor,
    private readonly options: SqliteQueueOptions,
  ) {
    this.workerId = options.workerId ?? newWorkerId();
    this.concurrency = options.concurrency ?? 2;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.maxAttempts = options.maxAttempts ?? 3;
    this.backoffMs = options.backoffMs ?? 5_000;
    this.now = options.now ?? Date.now;
    this.limits = queueLimits(options.limits);
    this.held = new HeldRuns(processor, {
      ...(options.onError ? { onError: options.onError } : {}),
      ...(options.onStoreError ? { onHeartbeatError: options.onStoreError } : {}),
    });
    this.db = openSqliteFile(options.path, SCHEMA, "run store");
    migrate(this.db);
    this.lockDir = options.path === ":memory:" ? undefined : ownerLockDir(options.path);
    const lockDir = this.lockDir;
    this.probes = options.liveness ?? machineProbes(lockDir ? (name) => lockFree(lockDir, name) : undefined);
    // Only a process that claims runs needs to be provably alive (or dead), and only one that
    // can give a proof at all (Linux) needs a lock file.
    const provable = this.concurrency > 0 && ownProof(this.probes) !== undefined;
    this.lock = provable && lockDir ? OwnerLock.acquire(lockDir) : undefined;
    this.proof = provable ? ownProof(this.probes, this.lock?.name) : undefined;
    this.proofText = this.proof ? JSON.stringify(this.proof) : null;
    // Checkpoints run on a timer, not inside whichever write crosses SQLite's threshold: left
    // automatic, about one enqueue in a hundred paid ~6 ms to copy the WAL back (measured).
    this.db.pragma("wal_autocheckpoint = 0");
    this.checkpointer = setInterval(() => {
      try {
        this.db.pragma("wal_checkpoint(PASSIVE)");
      } catch (error) {
        options.onStoreError?.(error);
      }
    }, 1_000);
    this.checkpointer.unref();
    if (this.concurrency > 0) {
      this.poller = setInterval(() => {
        this.pump();
      }, options.pollMs ?? 500);
      this.poller.unref();
      queueMicrotask(() => {
        this.pump();
      });
    }
  }

  enqueue(request: RunRequest): Promise<EnqueueOutcome> {
    if (this.closed) return Promise.reject(new Error("The run queue is shutting down"));
    // IMMEDIATE takes the write lock before reading: a deferred read-then-write fails at once
    // with SQLITE_BUSY_SNAPSHOT when another process wrote in between (busy_timeout cannot help).
    const outcome = this.db
      .transaction((): EnqueueOutcome => {
        const decided = this.decide(request);
        if (decided.outcome.status !== "queued" && decided.outcome.status !== "waiting") return decided.outcome;
        const now = this.now();
        this.db
          .prepare(
            "INSERT INTO runs (run_id, key, delivery_id, issue_key, request, state, available_at, " +
              "created_at, repo_id, installation_id, rank) " +
              "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
          )
          .run(
            request.runId,
            request.key,
            request.deliveryId,
            issueKey(request),
            JSON.stringify(request),
            now,
            now,
            request.repo.id,
            request.installationId,
            decided.rank,
          );
        this.db
          .prepare("INSERT OR IGNORE INTO deliveries (delivery_id, run_id, received_at) VALUES (?, ?, ?)")
          .run(request.deliveryId, request.runId, now);
        return decided.outcome;
      })
      .immediate();
    if (outcome.status === "queued" || outcome.status === "waiting")
      queueMicrotask(() => {
        this.pump();
      });
    return Promise.resolve(outcome);
  }

  admission(request: RunRequest, acknowledging: readonly AcknowledgingRun[] = []): Promise<EnqueueOutcome> {
    return Promise.resolve(this.decide(request, acknowledging).outcome);
  }

  seen(key: string): Promise<boolean> {
    return Promise.resolve(this.db.prepare("SELECT 1 FROM runs WHERE key = ?").get(key) !== undefined);
  }

  activeRun(key: string): Promise<string | undefined> {
    return Promise.resolve(this.activeOn(key));
  }

  /**
   * Cancels the active run of an issue. A queued run ends at once (its worker reports ⏹); a
   * running one is flagged, and whichever worker holds it aborts it at its next heartbeat.
   */
  cancel(key: string): Promise<boolean> {
    const row = this.db
      .prepare(
        `SELECT run_id, state FROM runs WHERE issue_key = ? AND state IN ('queued', 'running') ${ISSUE_ORDER} LIMIT 1`,
      )
      .get(key) as { run_id: string; state: RunState } | undefined;
    if (!row) return Promise.resolve(false);
    this.db.prepare("UPDATE runs SET cancel_requested = 1 WHERE run_id = ?").run(row.run_id);
    this.held.abort(row.run_id);
    if (row.state === "queued") this.pump();
    return Promise.resolve(true);
  }

  stats(): Promise<QueueStats> {
    const rows = this.db
      .prepare("SELECT state, COUNT(*) AS n FROM runs WHERE state IN ('queued', 'running') GROUP BY state")
      .all() as Array<{ state: RunState; n: number }>;
    return Promise.resolve({
      queued: rows.find((row) => row.state === "queued")?.n ?? 0,
      running: rows.find((row) => row.state === "running")?.n ?? 0,
    });
  }

  activeRunIds(): Promise<Set<string>> {
    const rows = this.db.prepare("SELECT run_id FROM runs WHERE state IN ('queued', 'running')").all() as Array<{
      run_id: string;
    }>;
    return Promise.resolve(new Set(rows.map((row) => row.run_id)));
  }

  /** Resolves once this process has nothing running and nothing it could claim. */
  idle(): Promise<void> {
    return this.idleSignal.wait();
  }

  async close(graceMs = 30_000): Promise<void> {
    this.closed = true;
    if (this.poller) clearInterval(this.poller);
    clearInterval(this.checkpointer);
    await this.held.drain(graceMs);
    this.db.close();
    this.lock?.release();
  }

  /** Duplicate, refused, or accepted with its fair rank — read in the caller's transaction. */
  private decide(
    request: RunRequest,
    acknowledging: readonly AcknowledgingRun[] = [],
  ): { outcome: EnqueueOutcome; rank: number } {
    const byDelivery = this.db
      .prepare("SELECT run_id FROM deliveries WHERE delivery_id = ?")
      .get(request.deliveryId) as { run_id: string } | undefined;
    const existing = this.db.prepare("SELECT run_id FROM runs WHERE key = ?").get(request.key) as
      { run_id: string } | undefined;
    const duplicate = existing ?? (byDelivery && request.trigger.kind === "comment" ? byDelivery : undefined);
    if (duplicate) return { outcome: { status: "duplicate", runId: duplicate.run_id }, rank: 0 };
    const issueRuns = (
      this.db
        .prepare(`SELECT run_id FROM runs WHERE issue_key = ? AND state IN ('queued', 'running') ${ISSUE_ORDER}`)
        .all(issueKey(request)) as Array<{ run_id: string }>
    ).map((row) => row.run_id);
    const count = (sql: string, id: number): number => (this.db.prepare(sql).get(id) as { n: number }).n;
    const counts = withAcknowledging(
      {
        issueRuns,
        repositoryQueued: count(
          "SELECT COUNT(*) AS n FROM runs WHERE repo_id = ? AND state = 'queued'",
          request.repo.id,
        ),
        installationQueued: count(
          "SELECT COUNT(*) AS n FROM runs WHERE installation_id = ? AND state = 'queued'",
          request.installationId,
        ),
      },
      request,
      issueKey(request),
      acknowledging,
      (runId) => this.db.prepare("SELECT 1 FROM runs WHERE run_id = ?").get(runId) !== undefined,
    );
    const refusal = refusalFor(counts, this.limits);
    if (refusal) return { outcome: refusal, rank: 0 };
    const rank =
      count(
        "SELECT COUNT(*) AS n FROM runs WHERE installation_id = ? AND state IN ('queued', 'running')",
        request.installationId,
      ) + 1;
    const behind = counts.issueRuns[0];
    if (behind) return { outcome: { status: "waiting", behind }, rank };
    const ahead = count("SELECT COUNT(*) AS n FROM runs WHERE state = 'queued' AND rank <= ?", rank);
    return { outcome: { status: "queued", ahead }, rank };
  }

  private activeOn(key: string): string | undefined {
    const row = this.db
      .prepare(`SELECT run_id FROM runs WHERE issue_key = ? AND state IN ('queued', 'running') ${ISSUE_ORDER} LIMIT 1`)
      .get(key) as { run_id: string } | undefined;
    return row?.run_id;
  }

  private hasClaimable(): boolean {
    return (
      this.db.prepare("SELECT 1 FROM runs WHERE state = 'queued'").get() !== undefined || this.stalled().length > 0
    );
  }

  /** Claims runs while there is room, in order, never two on one issue. */
  private pump(): void {
    if (this.closed || this.concurrency === 0) return;
    try {
      void this.recoverStalled().catch((error: unknown) => this.options.onStoreError?.(error));
      const now = this.now();
      if (this.sweptAt === undefined || now - this.sweptAt > LOCK_SWEEP_MS) {
        this.sweptAt = now;
        this.sweepLocks();
      }
      while (this.held.size < this.concurrency) {
        const row = this.claim();
        if (!row) break;
        this.start(row);
      }
      this.idleSignal.check();
    } catch (error) {
      // Another process held the write lock past the busy timeout: nothing was claimed, and
      // the next poll tries again. Throwing here would end the process from a timer.
      this.options.onStoreError?.(error);
    }
  }

  private claim(): RunRow | undefined {
    return this.db
      .transaction((): RunRow | undefined => {
        const now = this.now();
        const cap = this.options.maxInFlight ?? 0;
        if (
          cap > 0 &&
          (this.db.prepare("SELECT COUNT(*) AS n FROM runs WHERE state = 'running'").get() as { n: number }).n >= cap
        )
          return undefined;
        // Fair order: each installation's first live run before anyone's second, then by age.
        const row = this.db
          .prepare(
            `SELECT * FROM runs r WHERE r.state = 'queued' AND r.available_at <= @now
             AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.issue_key = r.issue_key AND o.state = 'running')
             AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.issue_key = r.issue_key AND e.state = 'queued' ` +
              `AND (e.created_at < r.created_at OR (e.created_at = r.created_at AND e.rowid < r.rowid)))
             AND (@repoCap = 0 OR (SELECT COUNT(*) FROM runs x WHERE x.repo_id = r.repo_id ` +
              `AND x.state = 'running') < @repoCap)
             AND (@installationCap = 0 OR (SELECT COUNT(*) FROM runs y ` +
              `WHERE y.installation_id = r.installation_id AND y.state = 'running') < @installationCap)
           ORDER BY r.rank, r.created_at, r.rowid LIMIT 1`,
          )
          .get({
            now,
            repoCap: this.limits.maxRunningPerRepository,
            installationCap: this.limits.maxRunningPerInstallation,
          }) as RunRow | undefined;
        if (!row) return undefined;
        this.db
          .prepare(
            "UPDATE runs SET state = 'running', attempts = attempts + 1, lease_owner = ?, lease_until = ?, " +
              "lease_proof = ?, started_at = COALESCE(started_at, ?) WHERE run_id = ?",
          )
          .run(this.workerId, now + this.leaseMs, this.proofText, now, row.run_id);
        return { ...row, state: "running", attempts: row.attempts + 1 };
      })
      .immediate();
  }

  private start(row: RunRow): void {
    const request = JSON.parse(row.request) as RunRequest;
    void this.held
      .attempt(request, {
        cancelRequested: row.cancel_requested === 1,
        // Renews the lease, and carries cancellations made by other processes.
        heartbeat: () => {
          const current = this.db.prepare("SELECT cancel_requested FROM runs WHERE run_id = ?").get(row.run_id) as
            { cancel_requested: number } | undefined;
          this.db
            .prepare("UPDATE runs SET lease_until = ? WHERE run_id = ? AND lease_owner = ?")
            .run(this.now() + this.leaseMs, row.run_id, this.workerId);
          return current?.cancel_requested === 1;
        },
        heartbeatMs: Math.max(50, Math.floor(this.leaseMs / 3)),
      })
      .then((outcome) => {
        this.record(row.run_id, outcome);
      })
      .catch((error: unknown) => this.options.onStoreError?.(error))
      .finally(() => {
        this.pump();
      });
  }

  private record(runId: string, outcome: AttemptOutcome): void {
    if (outcome.kind === "handed-back") this.handBack(runId);
    else if (outcome.kind === "threw") this.finish(runId, "done", String(outcome.error));
    else this.finish(runId, outcome.kind);
  }

  /** A run aborted by our own shutdown (not by a user) goes back to the queue for the next worker. */
  private handBack(runId: string): void {
    this.db
      .prepare(
        "UPDATE runs SET state = 'queued', attempts = MAX(attempts - 1, 0), " +
          "lease_owner = NULL, lease_until = NULL, lease_proof = NULL WHERE run_id = ? AND lease_owner = ?",
      )
      .run(runId, this.workerId);
  }

  private finish(runId: string, state: RunState, error?: string): void {
    this.db
      .prepare(
        "UPDATE runs SET state = ?, finished_at = ?, lease_owner = NULL, lease_until = NULL, lease_proof = NULL, " +
          "last_error = ? WHERE run_id = ? AND lease_owner = ?",
      )
      .run(state, this.now(), error ?? null, runId, this.workerId);
  }

  /**
   * Running runs held by no live worker: the lease lapsed (no heartbeat came), or the owner is
   * provably gone (see liveness.ts) — a crashed process restarted on the same machine need not
   * wait out the dead one's lease. Another host or boot, or no proof, leaves the lease to decide.
   */
  private stalled(): Array<{ row: RunRow; dead: boolean }> {
    const now = this.now();
    const rows = this.db
      .prepare("SELECT * FROM runs WHERE state = 'running' AND (lease_until < ? OR lease_proof IS NOT NULL)")
      .all(now) as RunRow[];
    const found: Array<{ row: RunRow; dead: boolean }> = [];
    for (const row of rows) {
      if (this.held.has(row.run_id)) continue;
      if (row.lease_until !== null && row.lease_until < now) found.push({ row, dead: false });
      else if (this.proof && judgeOwner(readProof(row.lease_proof), this.proof, this.probes).owner === "dead")
        found.push({ row, dead: true });
    }
    return found;
  }

  /** Stalled runs are retried with backoff, or given up as interrupted once their attempts are spent. */
  private async recoverStalled(): Promise<void> {
    const now = this.now();
    // Only the claim that was judged is taken back: a heartbeat or a new claim since means it lives.
    const unchanged =
      "WHERE run_id = @runId AND state = 'running' AND lease_owner IS @owner AND lease_until IS @leaseUntil";
    for (const { row, dead } of this.stalled()) {
      const claim = { runId: row.run_id, owner: row.lease_owner, leaseUntil: row.lease_until };
      if (row.attempts < this.maxAttempts && !row.cancel_requested) {
        // A run whose first worker provably died starts again at once. One that has lost two may
        // be what kills them, so it backs off as after a lapsed lease.
        const delay = dead && row.attempts <= 1 ? 0 : this.backoffMs * 2 ** (row.attempts - 1);
        this.db
          .prepare(
            "UPDATE runs SET state = 'queued', lease_owner = NULL, lease_until = NULL, lease_proof = NULL, " +
              `available_at = @availableAt ${unchanged}`,
          )
          .run({ ...claim, availableAt: now + delay });
        continue;
      }
      const changed = this.db
        .prepare(
          "UPDATE runs SET state = 'interrupted', finished_at = @now, lease_owner = NULL, lease_until = NULL, " +
            `lease_proof = NULL ${unchanged}`,
        )
        .run({ ...claim, now });
      if (changed.changes === 1) {
        const reason = interruptReason(row.attempts, row.cancel_requested === 1);
        await this.options.onInterrupted?.(JSON.parse(row.request) as RunRequest, reason).catch(() => undefined);
      }
    }
  }

  /** At start and now and then: lock files of dead processes that no running claim names (owner-lock.ts). */
  private sweepLocks(): void {
    if (!this.lockDir) return;
    const named = this.db.prepare("SELECT lease_proof FROM runs WHERE state = 'running'").all() as Array<{
      lease_proof: string | null;
    }>;
    const keep = new Set(named.map((row) => readProof(row.lease_proof)?.lock).filter((name) => name !== undefined));
    if (this.lock) keep.add(this.lock.name);
    sweepOwnerLocks(this.lockDir, keep);
  }
}

/**
 * Runs queued or running in a store (for the reaper); empty when there is no store yet. A store
 * that cannot be read is an error: guessing "no active runs" would reap live sandboxes.
 */
export function activeRunIds(path: string): Set<string> {
  if (!existsSync(path)) return new Set();
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    const rows = db.prepare("SELECT run_id FROM runs WHERE state IN ('queued', 'running')").all() as Array<{
      run_id: string;
    }>;
    return new Set(rows.map((row) => row.run_id));
  } catch (error) {
    throw new RunStoreError(
      `Cannot read the run store at ${path} (HARNESS_DB) to tell live sandboxes ` +
        `from orphans: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  } finally {
    db?.close();
  }
}
