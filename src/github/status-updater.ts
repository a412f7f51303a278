import type { HarnessEvent, Reporter } from "../contracts/events.js";
import { totalTokens } from "../contracts/types.js";
import { renderStatusComment, type StatusView, type StepState } from "./status-comment.js";

/** Writes the status comment's body (the comment itself already exists). */
export interface CommentWriter {
  update(body: string): Promise<void>;
}

export interface StatusUpdaterOptions {
  /** Least time between two edits during a run, in ms: GitHub limits content writes per minute. */
  minIntervalMs?: number;
  /** Attempts per edit when GitHub answers with a rate limit or a 5xx. */
  maxAttempts?: number;
  /** First backoff in ms (doubled each attempt) when GitHub gives no `retry-after`. */
  backoffMs?: number;
  now?: () => number;
  /** Called when an edit is finally given up on: a comment failure must never fail the run. */
  onGiveUp?: (error: unknown) => void;
}

/**
 * Keeps one comment up to date without flooding GitHub: edits are throttled to one per
 * interval, intermediate states are coalesced (only the latest body is written), one edit is in
 * flight at a time, and rate-limit or server errors are retried with backoff.
 */
export class StatusUpdater {
  private latest: string | undefined;
  private written: string | undefined;
  private lastWrite = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private readonly minIntervalMs: number;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly now: () => number;

  constructor(
    private readonly writer: CommentWriter,
    private readonly options: StatusUpdaterOptions = {},
  ) {
    this.minIntervalMs = options.minIntervalMs ?? 5_000;
    this.maxAttempts = options.maxAttempts ?? 4;
    this.backoffMs = options.backoffMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /** Records the newest body; it is written when the interval allows. */
  set(body: string): void {
    this.latest = body;
    this.schedule();
  }

  /** Writes the newest body now (the run's final state) and waits for it. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
    if (this.latest !== undefined && this.latest !== this.written) await this.write();
  }

  private schedule(): void {
    if (this.timer || this.inFlight) return;
    const wait = Math.max(0, this.lastWrite + this.minIntervalMs - this.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.write();
    }, wait);
    this.timer.unref();
  }

  private write(): Promise<void> {
    const body = this.latest;
    if (body === undefined || body === this.written) return Promise.resolve();
    const attempt = async (): Promise<void> => {
      for (let tries = 1; ; tries++) {
        try {
          await this.writer.update(body);
          this.written = body;
          return;
        } catch (error) {
          const delay = retryDelay(error, this.backoffMs * 2 ** (tries - 1));
          if (delay === undefined || tries >= this.maxAttempts) {
            this.options.onGiveUp?.(error);
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, delay));
        }
      }
    };
    this.lastWrite = this.now();
    this.inFlight = attempt().finally(() => {
      this.inFlight = undefined;
      if (this.latest !== this.written) this.schedule();
    });
    return this.inFlight;
  }
}

/** A notice as a sentence of the comment's note. */
function capitalised(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`.replace(/\.$/, "");
}

/** Backoff for retryable GitHub answers (rate limits, 5xx, network), undefined for the rest. */
function retryDelay(error: unknown, fallbackMs: number): number | undefined {
  if (error === null || typeof error !== "object") return fallbackMs;
  const status = "status" in error && typeof error.status === "number" ? error.status : undefined;
  const headers =
    "response" in error && error.response && typeof error.response === "object" && "headers" in error.response
      ? (error.response.headers as Record<string, string | undefined>)
      : {};
  const retryAfter = Number(headers["retry-after"]);
  if (
    status === undefined ||
    status >= 500 ||
    status === 429 ||
    (status === 403 && /rate limit/i.test(messageOf(error)))
  ) {
    return Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, 60_000) : fallbackMs;
  }
  return undefined;
}

function messageOf(error: object): string {
  return "message" in error && typeof error.message === "string" ? error.message : "";
}

/**
 * A reporter that turns harness events into the status comment: the checklist of steps with
 * state and duration while the run goes, and the outcome at the end.
 */
export class StatusCommentReporter implements Reporter {
  constructor(
    readonly view: StatusView,
    private readonly updater: StatusUpdater,
  ) {}

  emit(event: HarnessEvent): void {
    const view = this.view;
    switch (event.type) {
      case "run.started":
        view.phase = "running";
        view.blueprint = event.blueprint;
        view.steps = event.nodes.map((node) => ({
          id: node.id,
          title: node.title,
          state: "pending",
          attempt: 1,
          onFailureOnly: node.onFailureOnly,
        }));
        view.steps.push({ id: "__push", title: "Push and open the pull request", state: "pending", attempt: 1 });
        break;
      case "node.started": {
        const step = this.stepFor(event.nodeId, event.attempt, event.title);
        step.state = "running";
        delete step.durationMs;
        delete step.activity;
        break;
      }
      case "node.progress": {
        const step = view.steps.find((each) => each.id === event.nodeId && each.state === "running");
        if (!step) return;
        step.activity = event.text;
        break;
      }
      case "node.finished": {
        const step = this.stepFor(event.report.nodeId, event.report.attempt, event.report.title);
        step.state = event.report.status;
        step.durationMs = event.report.durationMs;
        delete step.activity;
        if (event.report.turns !== undefined) view.turns = (view.turns ?? 0) + event.report.turns;
        if (event.report.costUsd !== undefined) view.costUsd = (view.costUsd ?? 0) + event.report.costUsd;
        if (event.report.costEstimated) view.costEstimated = true;
        if (event.report.tokens) view.tokens = (view.tokens ?? 0) + totalTokens(event.report.tokens);
        break;
      }
      case "commit.finished":
        view.changedFiles = event.changedFiles;
        break;
      case "run.notice":
        if (event.quiet) break;
        view.note = view.note ? `${view.note} ${capitalised(event.text)}.` : `${capitalised(event.text)}.`;
        break;
      case "push.finished": {
        const push = view.steps.find((step) => step.id === "__push");
        if (push) push.state = event.result.pushed && event.result.prUrl ? "succeeded" : "failed";
        break;
      }
      case "run.finished": {
        const { report } = event;
        view.durationMs = report.durationMs;
        const push = report.pushResult;
        if (report.status === "paused" && report.paused) {
          view.phase = "paused";
          view.paused = { ...view.paused, spentUsd: report.paused.spentUsd, limitUsd: report.paused.limitUsd };
          if (report.paused.diffstat) view.diffstat = report.paused.diffstat;
          if (report.paused.patch) view.patch = report.paused.patch;
        } else if (report.status === "succeeded" && push?.pushed && push.prUrl) {
          view.phase = "succeeded";
          view.prUrl = push.prUrl;
          if (push.prReused) view.prReused = true;
          if (push.draftUnavailable) view.draftUnavailable = true;
        } else {
          view.phase = report.status === "succeeded" || report.status === "paused" ? "failed" : report.status;
          const error = push?.error ?? report.error;
          if (error) view.error = error;
          if (push?.remedy) view.remedy = push.remedy;
          if (push?.diffstat) view.diffstat = push.diffstat;
          if (push?.patch) view.patch = push.patch;
        }
        for (const step of view.steps) if (step.state === "pending" && !step.onFailureOnly) step.state = "skipped";
        break;
      }
      case "node.output":
      case "node.log":
      case "sandbox.ready":
        return;
    }
    this.updater.set(renderStatusComment(view));
  }

  close(): Promise<void> {
    return this.updater.flush();
  }

  /** The step line for a node attempt: a retry updates its line rather than adding one. */
  private stepFor(id: string, attempt: number, title: string) {
    let step = this.view.steps.find((candidate) => candidate.id === id);
    if (!step) {
      step = { id, title, state: "pending" as StepState, attempt };
      this.view.steps.splice(Math.max(0, this.view.steps.length - 1), 0, step);
    }
    step.attempt = attempt;
    return step;
  }
}
