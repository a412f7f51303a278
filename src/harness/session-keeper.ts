import { createHash } from "node:crypto";
import type { SessionFacts, SessionFile, SessionLocation } from "../agents/types.js";
import type { Sandbox } from "../sandbox/types.js";
import { describeError, SandboxFileTooLargeError } from "../util/errors.js";
import { REDACTED } from "../util/redact.js";
import type { AgentSessionRecord, SessionHeartbeat, SessionStore } from "./session-store.js";

/** Largest session record kept: far above a long session's (a two-turn Claude session is 260 KB). */
export const MAX_SESSION_RECORD_BYTES = 8 * 1024 * 1024;
/** How often the record is copied while the agent step runs. */
export const SESSION_HEARTBEAT_MS = 5_000;
/** Longest first line read for the session id and version (Codex's `session_meta` is about 22 KB). */
const MAX_FIRST_LINE_BYTES = 1024 * 1024;
/** Deepest JSON walked when masking a line; deeper lines are masked as text. */
const MAX_JSON_DEPTH = 64;

export interface SessionKeeperOptions {
  sandbox: Pick<Sandbox, "workDir" | "downloadBytes" | "exec">;
  store: SessionStore;
  runId: string;
  nodeId: string;
  attempt: number;
  agent: string;
  location: SessionLocation;
  /** The driver's reading of a line: the session id and version it names. */
  facts?: ((line: string) => SessionFacts | undefined) | undefined;
  /** Masks known secrets in text (the run's redactor). */
  mask: (text: string) => string;
  now: () => Date;
  /**
   * Calls `tick` every `intervalMs` until the returned function is called (default: a timer);
   * `tick` resolves when the copy it started is done.
   */
  every?: (intervalMs: number, tick: () => Promise<void>) => () => void;
  intervalMs?: number;
  maxBytes?: number;
  pullRequestUrl?: string | undefined;
  /** Where the keeper says what went wrong; it never throws. */
  log: (message: string) => void;
}

/**
 * Keeps an agent CLI's own session record while its step runs: every few seconds, and once more
 * when the step ends, it reads the record from the sandbox (bounded), masks known secrets and puts
 * it in the session store, with the time of the copy and whether the record grew since the last
 * one, so a later step can tell a CLI that has gone quiet from one still at work.
 *
 * The record is the agent's to write, so it is read as hostile: read with a bound, lines a CLI is
 * still writing left for the next copy, masked line by line (a JSON line is masked in its string
 * values, so masking never breaks a line's JSON), and every failure logged, never thrown: the
 * step's outcome never depends on its session record.
 *
 * Over the bound the record is not cut: the store keeps the last copy that fitted (the session's
 * start, which a resume can still read) marked truncated. Cutting the start instead would keep
 * lines no CLI can resume from (the session header and the first messages are what they read).
 */
export class SessionKeeper {
  private readonly maxBytes: number;
  private readonly logged = new Set<string>();
  private sessionId: string | undefined;
  private cliVersion: string | undefined;
  private found: string | undefined;
  private lastDigest: string | undefined;
  private heartbeat: SessionHeartbeat | undefined;
  private stored = false;
  private lastContent: Buffer | undefined;
  /** The complete lines `lastContent` was masked from, as read. */
  private lastComplete: Buffer | undefined;
  private truncated = false;
  private copying: Promise<void> | undefined;
  private stopTimer: (() => void) | undefined;

  constructor(private readonly options: SessionKeeperOptions) {
    this.maxBytes = options.maxBytes ?? MAX_SESSION_RECORD_BYTES;
  }

  /** Starts the heartbeat copies. */
  start(): void {
    const every = this.options.every ?? everyInterval;
    // A copy still under way is the heartbeat: copies never overlap.
    this.stopTimer = every(this.options.intervalMs ?? SESSION_HEARTBEAT_MS, () => this.copying ?? this.copy());
  }

  /** A line of the agent's live output, which may name its session. */
  line(line: string): void {
    this.learn(line);
  }

  /** The step has ended: no more heartbeats, and one last copy. */
  async finish(): Promise<void> {
    this.stopTimer?.();
    this.stopTimer = undefined;
    await this.copying;
    await this.copy();
    if (!this.stored) this.say(`no session record of the ${this.options.agent} agent was kept: ${this.why()}`);
  }

  private why(): string {
    if (this.truncated) return `it was over ${String(this.maxBytes)} bytes from the first copy`;
    return this.sessionId === undefined && this.options.location.file(undefined) === undefined
      ? "its output named no session"
      : "its record was never found in the sandbox";
  }

  private learn(line: string): void {
    if (this.sessionId !== undefined && this.cliVersion !== undefined) return;
    let facts: SessionFacts | undefined;
    try {
      facts = this.options.facts?.(line);
    } catch {
      return;
    }
    if (facts?.id !== undefined && this.sessionId === undefined) this.sessionId = facts.id;
    if (facts?.cliVersion !== undefined && this.cliVersion === undefined) this.cliVersion = facts.cliVersion;
  }

  private copy(): Promise<void> {
    const copying = this.copyOnce()
      .catch((error: unknown) => {
        this.say(`the ${this.options.agent} agent's session record could not be kept: ${describeError(error)}`);
      })
      .finally(() => {
        if (this.copying === copying) this.copying = undefined;
      });
    this.copying = copying;
    return copying;
  }

  private async copyOnce(): Promise<void> {
    const path = await this.recordPath();
    if (path === undefined) return;
    let bytes: Buffer;
    try {
      bytes = await this.options.sandbox.downloadBytes(path, this.maxBytes);
    } catch (error) {
      if (error instanceof SandboxFileTooLargeError) {
        if (!this.truncated) {
          this.truncated = true;
          this.say(
            `the ${this.options.agent} agent's session record grew past ${String(this.maxBytes)} bytes: ` +
              `the last copy that fitted is kept, marked truncated`,
          );
          if (this.stored) await this.options.store.put(this.record(this.lastContent ?? Buffer.alloc(0)));
        }
        return;
      }
      if (this.stored)
        this.say(
          `the ${this.options.agent} agent's session record can no longer be read (${describeError(error)}): ` +
            `the last copy is kept`,
        );
      return;
    }
    if (this.truncated) return;
    const digest = createHash("sha256").update(bytes).digest("hex");
    const changed = digest !== this.lastDigest;
    this.lastDigest = digest;
    const at = this.options.now().toISOString();
    this.heartbeat = { copiedAt: at, grew: changed, changedAt: changed ? at : (this.heartbeat?.changedAt ?? at) };
    if (!changed && this.stored) {
      await this.options.store.heartbeat(this.options.runId, this.heartbeat);
      return;
    }
    const complete = bytes.subarray(0, bytes.lastIndexOf(0x0a) + 1);
    if (complete.length === 0) return;
    this.learn(firstLine(complete));
    // A CLI appends to its record: only the lines new since the last copy are masked again.
    const kept = this.lastComplete;
    const appended =
      kept !== undefined && this.lastContent !== undefined && complete.subarray(0, kept.length).equals(kept);
    const content = appended
      ? Buffer.concat([
          this.lastContent ?? Buffer.alloc(0),
          maskedBytes(complete.subarray(kept.length), this.options.mask),
        ])
      : maskedBytes(complete, this.options.mask);
    if (content.length > this.maxBytes) {
      // Masks longer than what they hide: the bound holds for what is stored, too.
      this.truncated = true;
      this.say(`the ${this.options.agent} agent's session record, masked, is over ${String(this.maxBytes)} bytes`);
      if (this.stored) await this.options.store.put(this.record(this.lastContent ?? Buffer.alloc(0)));
      return;
    }
    this.lastContent = content;
    this.lastComplete = Buffer.from(complete);
    await this.options.store.put(this.record(content));
    this.stored = true;
  }

  private record(content: Buffer): AgentSessionRecord {
    const { runId, nodeId, attempt, agent, pullRequestUrl } = this.options;
    const at = this.options.now().toISOString();
    return {
      runId,
      nodeId,
      attempt,
      agent,
      ...(this.cliVersion !== undefined ? { cliVersion: this.cliVersion } : {}),
      ...(this.sessionId !== undefined ? { sessionId: this.sessionId } : {}),
      ...(pullRequestUrl !== undefined ? { pullRequestUrl } : {}),
      content,
      truncated: this.truncated,
      heartbeat: this.heartbeat ?? { copiedAt: at, grew: false, changedAt: at },
    };
  }

  /** The record's path relative to the checkout, once it is known. */
  private async recordPath(): Promise<string | undefined> {
    if (this.found !== undefined) return this.found;
    const file: SessionFile | undefined = this.options.location.file(this.sessionId);
    if (file === undefined) return undefined;
    const absolute = "path" in file ? file.path : await this.search(file.under, file.name);
    if (absolute === undefined) return undefined;
    const relative = this.insideCheckout(absolute);
    if (relative === undefined) {
      this.say(`the ${this.options.agent} agent's session record is outside the checkout (${absolute}): not kept`);
      return undefined;
    }
    // A searched-for path is fixed once found; a given one is fixed from the start.
    this.found = relative;
    return relative;
  }

  /** The first file called `name` (a glob) under `under`, looked for in the sandbox. */
  private async search(under: string, name: string): Promise<string | undefined> {
    const result = await this.options.sandbox.exec({
      argv: ["find", under, "-type", "f", "-name", name],
      cwd: this.options.sandbox.workDir,
      timeout: 30_000,
      maxOutput: 64 * 1024,
    });
    if (result.exitCode !== 0 && result.stdout.trim() === "") return undefined;
    const first = result.stdout.split("\n")[0]?.trim();
    return first !== undefined && first !== "" && first.startsWith(`${under}/`) ? first : undefined;
  }

  private insideCheckout(absolute: string): string | undefined {
    const root = `${this.options.sandbox.workDir}/`;
    if (!absolute.startsWith(root)) return undefined;
    const relative = absolute.slice(root.length);
    const parts = relative.split("/");
    return parts.some((part) => part === "" || part === "." || part === "..") ? undefined : relative;
  }

  /** Logs each distinct message once: a heartbeat must not repeat a failure every few seconds. */
  private say(message: string): void {
    if (this.logged.has(message)) return;
    this.logged.add(message);
    try {
      this.options.log(message);
    } catch {
      // A log that fails is no reason to fail the step.
    }
  }
}

function everyInterval(intervalMs: number, tick: () => Promise<void>): () => void {
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  return () => {
    clearInterval(timer);
  };
}

function maskedBytes(bytes: Buffer, mask: (text: string) => string): Buffer {
  return Buffer.from(maskRecord(bytes.toString("utf8"), mask), "utf8");
}

function firstLine(bytes: Buffer): string {
  const end = bytes.indexOf(0x0a);
  const cut = Math.min(end < 0 ? bytes.length : end, MAX_FIRST_LINE_BYTES);
  return bytes.subarray(0, cut).toString("utf8");
}

/**
 * The record with known secrets masked, line by line. A line that holds nothing to mask is kept
 * byte for byte; a JSON line that does is masked in its strings (keys and values) and written
 * again, so its JSON stays whole; any other line is masked as text.
 */
export function maskRecord(text: string, mask: (text: string) => string): string {
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index] ?? "";
    if (line === "") continue;
    const masked = mask(line);
    // An escape could hide a value from the text pass: such lines are read as JSON too.
    if (masked === line && !line.includes("\\")) continue;
    lines[index] = maskJsonLine(line, mask) ?? masked;
  }
  return lines.join("\n");
}

function maskJsonLine(line: string, mask: (text: string) => string): string | undefined {
  if (!line.startsWith("{") && !line.startsWith("[")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
  const seen = { changed: false };
  const walk = (node: unknown, depth: number): unknown => {
    if (depth > MAX_JSON_DEPTH) throw new RangeError("too deep");
    if (typeof node === "string") {
      const masked = mask(node);
      if (masked !== node) seen.changed = true;
      return masked;
    }
    if (Array.isArray(node)) return node.map((item) => walk(item, depth + 1));
    if (node !== null && typeof node === "object") {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(node)) {
        const maskedKey = mask(key);
        if (maskedKey !== key) seen.changed = true;
        // A number or flag the text pass would mask beside its name (a known value, an assignment):
        // masked as a string, so the line stays JSON.
        const pair = item !== null && typeof item !== "object" && typeof item !== "string";
        if (pair && mask(`"${key}":${JSON.stringify(item)}`) !== `"${key}":${JSON.stringify(item)}`) {
          seen.changed = true;
          out[maskedKey] = REDACTED;
          continue;
        }
        out[maskedKey] = walk(item, depth + 1);
      }
      return out;
    }
    return node;
  };
  try {
    const masked = walk(value, 0);
    // Nothing in any one string: what the text pass found spans the JSON (`"API_KEY": "…"`).
    return seen.changed ? JSON.stringify(masked) : undefined;
  } catch {
    return undefined;
  }
}
