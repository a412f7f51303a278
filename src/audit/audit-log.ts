import { createRedactor, type Redactor } from "../util/redact.js";

/**
 * The audit trail: who asked for what, who approved it, which token was minted for which
 * repository, what was pushed where — kept for operators to export to their SIEM. Apart from the
 * run journal (which is for people watching a run), so it can be kept longer, exported as a
 * whole, and read by `seq` without knowing any run.
 *
 * `record` bounds and redacts whatever it is given, so a hostile intent or a careless caller can
 * neither bloat the trail nor put a token in it. It may reject when the store does not answer:
 * the trail must not break the webhook or the run it describes, so callers log the failure and
 * go on (`audit.record(...).catch((err) => log.warn(...))`).
 */
export interface AuditLog {
  /** Stores one entry (bounded, redacted, stamped with the store's clock unless `at` is given). */
  record(entry: Omit<AuditEntry, "at"> & { at?: string }): Promise<void>;
  /** The run's entries, oldest first: the first `limit` (default 200). */
  forRun(runId: string, limit?: number): Promise<AuditRecord[]>;
  /** Entries with `seq > afterSeq`, oldest first, at most `limit`: how the export pages. */
  after(afterSeq: number, limit: number): Promise<AuditRecord[]>;
  close(): Promise<void>;
}

export type AuditAction =
  /** A trigger accepted: a comment or a label (actor: the requester). */
  | "run.requested"
  /** Below the permission bar, over a quota, a fork PR… (`details.reason`). */
  | "request.refused"
  /** Held for approval (`requestId`). */
  | "request.pending"
  /** actor: the approver; `details.requester`, `requestId`, `runId`. */
  | "request.approved"
  | "run.cancelled"
  /** A run paused at its money budget goes on (actor: who continued it; `details.pausedRunId`, `raiseUsd`). */
  | "run.continued"
  /** `details.permissions` (e.g. "contents:read"), `details.repositories`. */
  | "token.minted"
  /** A run token for the model gateway (`details.agent`, `details.upstream`); never the token. */
  | "model_token.minted"
  /** The run ended: its gateway tokens stop working (`details.live`: how many were still live). */
  | "model_tokens.revoked"
  /** The gateway refused a call's token (`details.reason`, `details.path`): missing, unknown, revoked or foreign. */
  | "model_token.refused"
  /** `details.branch`, `details.commit`. */
  | "branch.pushed"
  /** `details.url`, `details.number`. */
  | "pull_request.opened"
  | "pull_request.updated"
  /** `details.state`, `details.errorKind`. */
  | "run.finished";

export const AUDIT_ACTIONS: readonly AuditAction[] = [
  "run.requested",
  "request.refused",
  "request.pending",
  "request.approved",
  "run.cancelled",
  "run.continued",
  "token.minted",
  "model_token.minted",
  "model_tokens.revoked",
  "model_token.refused",
  "branch.pushed",
  "pull_request.opened",
  "pull_request.updated",
  "run.finished",
];

export type AuditDetailValue = string | number | boolean | string[];

export interface AuditEntry {
  /** ISO-8601 UTC. */
  at: string;
  action: AuditAction;
  /** "owner/name". */
  repo: string;
  installationId?: number;
  issue?: number;
  runId?: string;
  requestId?: string;
  /** A GitHub login. */
  actor?: string;
  details?: Record<string, AuditDetailValue>;
}

/** An entry as stored: `seq` is assigned by the store and strictly increases across it. */
export interface AuditRecord extends AuditEntry {
  seq: number;
}

/** How much the trail holds, and how much one entry may. */
export interface AuditLimits {
  /** Entries kept in the whole trail; the oldest beyond it are dropped. */
  maxEntries: number;
  /** Characters kept of any one string (a field, a detail value, an array item). */
  maxValueChars: number;
  /** Items kept of a detail that is a list. */
  maxArrayItems: number;
  /** Detail keys kept; later keys are dropped. */
  maxDetailKeys: number;
  /** Characters of detail keys and values together; past it, later details are dropped. */
  maxDetailChars: number;
}

export const DEFAULT_AUDIT_LIMITS: AuditLimits = {
  maxEntries: 200_000,
  maxValueChars: 1_000,
  maxArrayItems: 50,
  maxDetailKeys: 30,
  maxDetailChars: 16_384,
};

export const DEFAULT_FOR_RUN_LIMIT = 200;

/** What every adapter takes besides its store. */
export interface AuditLogOptions {
  limits?: Partial<AuditLimits>;
  /**
   * Applied to every string recorded, e.g. `createRedactor(secretsFromEnv(env))` for the
   * deployment's own secrets. Token shapes (`createRedactor()`) are redacted whatever is given.
   */
  redactor?: Redactor;
  now?: () => Date;
}

/** Set on `details` when some details did not fit the entry's budget and were dropped. */
export const DETAILS_TRUNCATED_KEY = "_truncated";

const MAX_KEY_CHARS = 64;
/**
 * Text is cut to this before it is redacted: redaction is linear, but a caller could still hand
 * over megabytes, and nothing past the kept part is ever stored.
 */
const REDACTION_WINDOW = 64 * 1024;
const ELLIPSIS = "…";
/** Longer than any bounded token shape the redactor knows (GitHub's: a prefix and 255 characters). */
const LONGEST_BOUNDED_TOKEN = 300;

/** Turns what a caller handed over into what may be stored: bounded, redacted, stamped. */
export function boundEntry(
  entry: Omit<AuditEntry, "at"> & { at?: string },
  limits: AuditLimits,
  redactor: Redactor,
  now: () => Date,
): AuditEntry {
  const text = (value: string): string => boundText(value, limits.maxValueChars, redactor);
  const installationId = wholeNumber(entry.installationId);
  const issue = wholeNumber(entry.issue);
  const details = isRecord(entry.details) ? boundDetails(entry.details, limits, redactor) : undefined;
  return {
    at: timestamp(entry.at, now),
    action: text(entry.action) as AuditAction,
    repo: text(entry.repo),
    ...(installationId !== undefined ? { installationId } : {}),
    ...(issue !== undefined ? { issue } : {}),
    ...(typeof entry.runId === "string" ? { runId: text(entry.runId) } : {}),
    ...(typeof entry.requestId === "string" ? { requestId: text(entry.requestId) } : {}),
    ...(typeof entry.actor === "string" ? { actor: text(entry.actor) } : {}),
    ...(details ? { details } : {}),
  };
}

/** A stored entry with its seq, fields in a fixed order so exported lines read alike. */
export function withSeq(seq: number, entry: AuditEntry): AuditRecord {
  return {
    seq,
    at: entry.at,
    action: entry.action,
    repo: entry.repo,
    ...(entry.installationId !== undefined ? { installationId: entry.installationId } : {}),
    ...(entry.issue !== undefined ? { issue: entry.issue } : {}),
    ...(entry.runId !== undefined ? { runId: entry.runId } : {}),
    ...(entry.requestId !== undefined ? { requestId: entry.requestId } : {}),
    ...(entry.actor !== undefined ? { actor: entry.actor } : {}),
    ...(entry.details !== undefined ? { details: entry.details } : {}),
  };
}

/**
 * The caller's redactor, then the well-known token shapes: a redactor given for a few known
 * secrets must not let a token through.
 */
export function auditRedactor(redactor: Redactor | undefined): Redactor {
  const tokenShapes = createRedactor();
  return redactor ? (text) => tokenShapes(redactor(text)) : tokenShapes;
}

export function auditLimits(overrides: Partial<AuditLimits> | undefined): AuditLimits {
  const limits = { ...DEFAULT_AUDIT_LIMITS, ...overrides };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value < 1)
      throw new RangeError(`audit limit ${name} must be a positive whole number, got ${String(value)}`);
  }
  return limits;
}

/** A page size the adapters can pass to their stores: a whole number from 0 up. */
export function pageLimit(limit: number | undefined, fallback: number): number {
  if (limit === undefined || Number.isNaN(limit)) return fallback;
  return Math.max(0, Math.min(Math.floor(limit), Number.MAX_SAFE_INTEGER));
}

function boundDetails(
  details: Record<string, unknown>,
  limits: AuditLimits,
  redactor: Redactor,
): Record<string, AuditDetailValue> {
  const out: Record<string, AuditDetailValue> = {};
  let budget = limits.maxDetailChars;
  let kept = 0;
  let dropped = false;
  for (const [rawKey, rawValue] of Object.entries(details)) {
    if (kept >= limits.maxDetailKeys) {
      dropped = true;
      break;
    }
    const key = boundText(rawKey, MAX_KEY_CHARS, redactor);
    const value = boundValue(rawValue, limits, redactor);
    if (value === undefined || key === DETAILS_TRUNCATED_KEY) continue;
    const size =
      key.length + (Array.isArray(value) ? value.reduce((sum, item) => sum + item.length, 0) : String(value).length);
    if (size > budget) {
      dropped = true;
      break;
    }
    budget -= size;
    kept += 1;
    // defineProperty semantics: a key such as "__proto__" stays plain data.
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  if (dropped) out[DETAILS_TRUNCATED_KEY] = true;
  return out;
}

function boundValue(value: unknown, limits: AuditLimits, redactor: Redactor): AuditDetailValue | undefined {
  if (typeof value === "string") return boundText(value, limits.maxValueChars, redactor);
  if (typeof value === "boolean") return value;
  // JSON has no NaN or Infinity; as text they still say what the caller meant.
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (Array.isArray(value))
    return value.slice(0, limits.maxArrayItems).map((item) => boundText(String(item), limits.maxValueChars, redactor));
  return undefined;
}

/** Redacted, then cut to `max` characters (an ellipsis marks the cut). */
export function boundText(value: string, max: number, redactor: Redactor): string {
  let text = value;
  if (text.length > REDACTION_WINDOW) {
    // A token cut in two by the window would no longer look like a token to the redactor.
    text = dropTrailingWord(text.slice(0, REDACTION_WINDOW));
  }
  text = redactor(text);
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - ELLIPSIS.length))}${ELLIPSIS}`;
}

function dropTrailingWord(text: string): string {
  let end = text.length;
  const stop = Math.max(0, text.length - LONGEST_BOUNDED_TOKEN);
  while (end > stop && /[A-Za-z0-9_-]/.test(text.charAt(end - 1))) end -= 1;
  return text.slice(0, end);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function wholeNumber(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) ? value : undefined;
}

/**
 * ISO-8601 UTC, so the trail sorts and parses the same in any SIEM; the clock's when the caller
 * gave none (or nonsense).
 */
function timestamp(at: string | undefined, now: () => Date): string {
  if (typeof at === "string" && at.length <= 64) {
    const parsed = Date.parse(at);
    if (!Number.isNaN(parsed)) return new Date(parsed).toISOString();
  }
  return now().toISOString();
}

/** Runs synchronous store work so that a failure rejects, as the port promises, instead of throwing. */
export function settled<T>(work: () => T): Promise<T> {
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}
