import { randomInt } from "node:crypto";

/**
 * A `/harness <intent>`, or a review on Harness's pull request, from someone below the
 * repository's permission bar, waiting for a maintainer to approve exactly it: by its short `id`,
 * never "whatever was asked last".
 */
export interface PendingRequest {
  /** Shown to people in comments (e.g. "k7q2m9"): lower-case letters and digits, unique within its issue. */
  id: string;
  /** `<repoId>#<issueNumber>`. */
  issueKey: string;
  /** What runs once approved: the request as written, or the review's text as Harness read it. */
  intent: string;
  requester: { login: string; id: number };
  /** The comment that asked; for a review, the review's id. */
  commentId: number;
  /** Set when the request is a review: approving it starts a follow-up on the pull request. */
  review?: { reviewId: number };
  /** ms since the epoch. */
  createdAt: number;
  /** `createdAt` plus the store's `ttlMs`: from then on the request is gone. */
  expiresAt: number;
  /** Harness's reply announcing the request, once attached: a replacement can edit it instead of posting another. */
  replyCommentId?: number;
}

export type PendingRequestInput = Omit<PendingRequest, "id" | "createdAt" | "expiresAt" | "replyCommentId">;

export interface PendingRequestLimits {
  ttlMs: number;
  /** Other people's pending requests one issue may hold before a newcomer is refused. */
  maxPerIssue: number;
  /** One person's pending requests across every issue of every repository in the store. */
  maxPerPerson: number;
}

export const DEFAULT_PENDING_LIMITS: PendingRequestLimits = {
  ttlMs: 7 * 24 * 3600_000,
  maxPerIssue: 10,
  maxPerPerson: 5,
};

/** The longest intent kept (UTF-8 bytes); callers check first and tell the person, `put` throws. */
export const MAX_PENDING_INTENT_BYTES = 64 * 1024;
/** GitHub's own cap on a login. */
export const MAX_LOGIN_LENGTH = 39;
/** Issue keys and reply scopes are built by Harness, but bounded all the same: they become keys. */
export const MAX_PENDING_KEY_LENGTH = 200;
/** Ids come back in comments anyone can write; anything longer than this is no id of ours. */
export const MAX_PENDING_ID_LENGTH = 32;

export type PutOutcome =
  /** `replaced`: the same person's earlier pending request on this issue, now gone. */
  | { status: "stored"; request: PendingRequest; replaced?: PendingRequest }
  | { status: "refused"; reason: "issue_full" | "person_full"; limit: number };

export type TakeOnlyOutcome =
  | { status: "taken"; request: PendingRequest }
  | { status: "none" }
  | { status: "ambiguous"; pending: PendingRequest[] };

/**
 * Requests waiting for approval, and the "you may not ask" replies already sent. Adapters: in
 * memory (one process), the shared SQLite file, Redis. Every operation that removes or claims is
 * atomic across processes sharing the store.
 */
export interface PendingRequestStore {
  /**
   * Stores a request under a fresh id; one person keeps at most one pending request per issue.
   * Throws on an oversized intent or login.
   */
  put(input: PendingRequestInput): Promise<PutOutcome>;
  /**
   * Removes and returns exactly that request (id matched case-insensitively) if it is pending,
   * unexpired, on that issue.
   */
  take(issueKey: string, id: string): Promise<PendingRequest | undefined>;
  /** A bare `/harness approve`: takes the request only when it is the issue's one unexpired request. */
  takeOnly(issueKey: string): Promise<TakeOnlyOutcome>;
  /** The issue's unexpired requests, oldest first. */
  list(issueKey: string): Promise<PendingRequest[]>;
  /** Records Harness's reply on a pending request; false when it is no longer pending (taken, replaced, expired). */
  attachReply(issueKey: string, id: string, replyCommentId: number): Promise<boolean>;
  /**
   * True the first time per (scope, login, case-insensitive) within `windowMs`, false after;
   * exactly one caller wins a race.
   */
  claimReply(scope: string, login: string, windowMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface PendingRequestStoreOptions {
  limits?: Partial<PendingRequestLimits>;
  now?: () => number;
  /** Makes a candidate id; called again when the candidate is already in use on the issue. */
  newId?: () => string;
}

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
const ID_PATTERN = /^[a-z0-9]+$/;

/** Six characters: about two billion ids, so a clash within one issue's handful is rare and retried. */
export function randomPendingId(): string {
  return Array.from({ length: 6 }, () => ID_ALPHABET.charAt(randomInt(ID_ALPHABET.length))).join("");
}

/** How many candidates `put` tries before giving up: only a broken generator gets there. */
export const MAX_ID_ATTEMPTS = 20;

/** The limits and injected collaborators every adapter starts from. */
export function resolveStoreOptions(options: PendingRequestStoreOptions): {
  limits: PendingRequestLimits;
  now: () => number;
  newId: () => string;
} {
  const limits = { ...DEFAULT_PENDING_LIMITS, ...options.limits };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1)
      throw new Error(`The pending request limit ${name} must be a positive whole number, not ${String(value)}`);
  }
  return { limits, now: options.now ?? Date.now, newId: options.newId ?? randomPendingId };
}

/** Rejects what a store must never hold; the caller should have checked and answered the person already. */
export function checkPendingInput(input: PendingRequestInput): void {
  const bytes = Buffer.byteLength(input.intent, "utf8");
  if (bytes > MAX_PENDING_INTENT_BYTES)
    throw new Error(
      `A pending request's intent is ${String(bytes)} bytes, over the ` +
        `${String(MAX_PENDING_INTENT_BYTES)}-byte limit: ` +
        `check the length before storing it`,
    );
  checkLogin(input.requester.login);
  checkKey("issue key", input.issueKey);
  if (!Number.isSafeInteger(input.requester.id))
    throw new Error(`A pending request's requester id must be a whole number, not ${String(input.requester.id)}`);
  checkCommentId(input.commentId);
  if (input.review) checkCommentId(input.review.reviewId);
}

export function checkCommentId(commentId: number): void {
  if (!Number.isSafeInteger(commentId))
    throw new Error(`A comment id must be a whole number, not ${String(commentId)}`);
}

export function checkLogin(login: string): void {
  if (login.length === 0 || login.length > MAX_LOGIN_LENGTH)
    throw new Error(`A GitHub login has 1 to ${String(MAX_LOGIN_LENGTH)} characters, not ${String(login.length)}`);
}

export function checkKey(what: string, key: string): void {
  if (key.length === 0 || key.length > MAX_PENDING_KEY_LENGTH)
    throw new Error(
      `A pending request ${what} has 1 to ${String(MAX_PENDING_KEY_LENGTH)} characters, not ${String(key.length)}`,
    );
}

export function checkWindow(windowMs: number): void {
  if (!Number.isSafeInteger(windowMs) || windowMs < 1)
    throw new Error(`A reply window must be a positive whole number of ms, not ${String(windowMs)}`);
}

/** A fresh id from the generator, refused unless it is one people can type back. */
export function generatedId(newId: () => string): string {
  const id = newId();
  if (id.length === 0 || id.length > MAX_PENDING_ID_LENGTH || !ID_PATTERN.test(id))
    throw new Error(
      `A pending request id must be 1 to ${String(MAX_PENDING_ID_LENGTH)} lower-case letters and digits, ` +
        `not ${JSON.stringify(id.slice(0, 64))}`,
    );
  return id;
}

/** The id as stored, from what someone typed; undefined when it cannot be one of ours. */
export function normalizeRequestId(typed: string): string | undefined {
  const id = typed.trim().toLowerCase();
  return id.length > 0 && id.length <= MAX_PENDING_ID_LENGTH && ID_PATTERN.test(id) ? id : undefined;
}

export function idClashError(issueKey: string): Error {
  return new Error(
    `No free pending request id on ${issueKey} after ${String(MAX_ID_ATTEMPTS)} tries: ` +
      `the id generator keeps repeating itself`,
  );
}

/** Oldest first; ties (same ms) by id, so every adapter lists in the same order. */
/** The request `input` becomes under `id`, waiting from `now` for `ttlMs`. */
export function pendingRequest(input: PendingRequestInput, id: string, now: number, ttlMs: number): PendingRequest {
  return {
    id,
    issueKey: input.issueKey,
    intent: input.intent,
    requester: { login: input.requester.login, id: input.requester.id },
    commentId: input.commentId,
    ...(input.review ? { review: { reviewId: input.review.reviewId } } : {}),
    createdAt: now,
    expiresAt: now + ttlMs,
  };
}

export function oldestFirst(a: PendingRequest, b: PendingRequest): number {
  return a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * Runs a synchronous store operation as the port's promise: what it throws becomes a rejection,
 * as from the Redis store.
 */
export function settled<T>(operation: () => T): Promise<T> {
  return new Promise((resolve) => {
    resolve(operation());
  });
}

function copyOf(request: PendingRequest): PendingRequest {
  return {
    ...request,
    requester: { ...request.requester },
    ...(request.review ? { review: { ...request.review } } : {}),
  };
}

/**
 * In this process's memory: for a single process and for tests. Lost on restart, and not shared
 * with a second process, like the in-memory queue.
 */
export class MemoryPendingRequestStore implements PendingRequestStore {
  private readonly byIssue = new Map<string, PendingRequest[]>();
  /** Until when a reply is claimed, per `scope\0login`; in claim order, which is nearly expiry order. */
  private readonly replies = new Map<string, number>();
  private readonly limits: PendingRequestLimits;
  private readonly now: () => number;
  private readonly newId: () => string;

  constructor(options: PendingRequestStoreOptions = {}) {
    ({ limits: this.limits, now: this.now, newId: this.newId } = resolveStoreOptions(options));
  }

  put(input: PendingRequestInput): Promise<PutOutcome> {
    return settled(() => this.store(input));
  }

  take(issueKey: string, id: string): Promise<PendingRequest | undefined> {
    return settled(() => this.takeNow(issueKey, id));
  }

  takeOnly(issueKey: string): Promise<TakeOnlyOutcome> {
    return settled(() => this.takeOnlyNow(issueKey));
  }

  list(issueKey: string): Promise<PendingRequest[]> {
    return settled(() => this.live(issueKey).map(copyOf));
  }

  attachReply(issueKey: string, id: string, replyCommentId: number): Promise<boolean> {
    return settled(() => {
      checkCommentId(replyCommentId);
      const wanted = normalizeRequestId(id);
      const request = this.byIssue
        .get(issueKey)
        ?.find((pending) => pending.id === wanted && pending.expiresAt > this.now());
      if (request) request.replyCommentId = replyCommentId;
      return request !== undefined;
    });
  }

  claimReply(scope: string, login: string, windowMs: number): Promise<boolean> {
    return settled(() => this.claimReplyNow(scope, login, windowMs));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private store(input: PendingRequestInput): PutOutcome {
    checkPendingInput(input);
    const now = this.now();
    this.purgeExpired(now);
    const onIssue = this.byIssue.get(input.issueKey) ?? [];
    const earlier = onIssue.find((request) => request.requester.id === input.requester.id);
    if (!earlier) {
      if (onIssue.length >= this.limits.maxPerIssue)
        return { status: "refused", reason: "issue_full", limit: this.limits.maxPerIssue };
      if (this.countFor(input.requester.id) >= this.limits.maxPerPerson)
        return { status: "refused", reason: "person_full", limit: this.limits.maxPerPerson };
    }
    const id = this.freeId(input.issueKey, onIssue);
    const request = pendingRequest(input, id, now, this.limits.ttlMs);
    this.byIssue.set(input.issueKey, [...onIssue.filter((pending) => pending !== earlier), request]);
    return { status: "stored", request: copyOf(request), ...(earlier ? { replaced: copyOf(earlier) } : {}) };
  }

  private takeNow(issueKey: string, id: string): PendingRequest | undefined {
    const wanted = normalizeRequestId(id);
    const onIssue = this.byIssue.get(issueKey);
    const request = wanted === undefined ? undefined : onIssue?.find((pending) => pending.id === wanted);
    if (!onIssue || !request) return undefined;
    this.remove(issueKey, onIssue, request);
    return request.expiresAt > this.now() ? copyOf(request) : undefined;
  }

  private takeOnlyNow(issueKey: string): TakeOnlyOutcome {
    const live = this.live(issueKey);
    const only = live.length === 1 ? live[0] : undefined;
    if (only) {
      this.remove(issueKey, this.byIssue.get(issueKey) ?? [], only);
      return { status: "taken", request: copyOf(only) };
    }
    return live.length === 0 ? { status: "none" } : { status: "ambiguous", pending: live.map(copyOf) };
  }

  private claimReplyNow(scope: string, login: string, windowMs: number): boolean {
    checkKey("reply scope", scope);
    checkLogin(login);
    checkWindow(windowMs);
    const now = this.now();
    for (const [key, until] of this.replies) {
      if (until > now) break;
      this.replies.delete(key);
    }
    const key = `${scope}\u0000${login.toLowerCase()}`;
    const until = this.replies.get(key);
    if (until !== undefined && until > now) return false;
    // Deleted first so the claim moves to the end of the map and the sweep above stays in order.
    this.replies.delete(key);
    this.replies.set(key, now + windowMs);
    return true;
  }

  private live(issueKey: string): PendingRequest[] {
    const now = this.now();
    return (this.byIssue.get(issueKey) ?? []).filter((request) => request.expiresAt > now).sort(oldestFirst);
  }

  private countFor(requesterId: number): number {
    let count = 0;
    for (const onIssue of this.byIssue.values())
      count += onIssue.filter((request) => request.requester.id === requesterId).length;
    return count;
  }

  private freeId(issueKey: string, onIssue: PendingRequest[]): string {
    for (let attempt = 0; attempt < MAX_ID_ATTEMPTS; attempt++) {
      const id = generatedId(this.newId);
      if (!onIssue.some((request) => request.id === id)) return id;
    }
    throw idClashError(issueKey);
  }

  private remove(issueKey: string, onIssue: PendingRequest[], request: PendingRequest): void {
    const rest = onIssue.filter((pending) => pending !== request);
    if (rest.length > 0) this.byIssue.set(issueKey, rest);
    else this.byIssue.delete(issueKey);
  }

  private purgeExpired(now: number): void {
    for (const [issueKey, onIssue] of this.byIssue) {
      const live = onIssue.filter((request) => request.expiresAt > now);
      if (live.length === onIssue.length) continue;
      if (live.length > 0) this.byIssue.set(issueKey, live);
      else this.byIssue.delete(issueKey);
    }
  }
}
