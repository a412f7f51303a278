import type { Reporter } from "../../contracts/events.js";
import { asAcknowledgement } from "../../github/installation-throttle.js";
import { issueThread } from "../../github/issue-thread.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { renderStatusComment, type RunPhase, type StatusView } from "../../github/status-comment.js";
import { StatusCommentReporter, StatusUpdater } from "../../github/status-updater.js";
import { describeError } from "../../util/errors.js";
import type { Log } from "../../util/log.js";
import type { RunRequest } from "../request.js";
import { findStatusComment } from "./earlier-attempt.js";

/**
 * The run's status comment on the issue: what it shows (the view) and the throttled edits that
 * show it. Until it is opened, nothing is written, and finishing is a no-op.
 */
export class RunStatusComment {
  readonly view: StatusView;
  private updater: StatusUpdater | undefined;
  /** The comment's id once it exists (given by the handler, found again, or created here). */
  commentId: number | undefined;

  constructor(
    private readonly request: RunRequest,
    private readonly redact: (text: string) => string,
    runUrl: string | undefined,
  ) {
    this.view = {
      runId: request.runId,
      phase: "running",
      requester: request.requester.login,
      intent: request.intent,
      steps: [],
      ...(request.issue.pullRequest ? { followUp: true } : {}),
      ...(runUrl ? { runUrl } : {}),
    };
  }

  /** Starts editing the comment through this installation client. */
  open(octokit: OctokitLike, options: { minIntervalMs: number; log: Log }): void {
    const { request } = this;
    // The comment may use the requests kept back for acknowledgements: it says why a run waits.
    const commenting = asAcknowledgement(octokit);
    const thread = issueThread(commenting, request.repo, request.issue.number);
    this.commentId = request.statusCommentId;
    this.updater = new StatusUpdater(
      {
        update: async (body) => {
          // The handler could not create the comment (GitHub was failing): the first update does,
          // unless an earlier attempt of this run already did.
          this.commentId ??= await findStatusComment(commenting, request);
          this.commentId = await thread.upsert(this.commentId, body);
        },
      },
      {
        minIntervalMs: options.minIntervalMs,
        onGiveUp: (error) => {
          options.log.warn({ err: describeError(error) }, "status comment update failed");
        },
      },
    );
  }

  /** Changes what the comment shows; the edit is written when the interval allows. */
  show(changes: Partial<StatusView>): void {
    Object.assign(this.view, changes);
    this.updater?.set(renderStatusComment(this.view));
  }

  /** The harness's events, turned into the comment's steps and outcome (once opened). */
  reporter(): Reporter {
    if (!this.updater) throw new Error("the status comment is not open");
    return new StatusCommentReporter(this.view, this.updater);
  }

  /** Writes what the reporter left unwritten, and waits for it. */
  async close(): Promise<void> {
    await this.updater?.flush();
  }

  /** Ends the comment in this phase, with the reason (redacted) and what to do about it. */
  async finish(phase: RunPhase, error?: string, remedy?: string): Promise<void> {
    this.view.phase = phase;
    if (error) this.view.error = this.redact(error);
    if (remedy) this.view.remedy = remedy;
    this.updater?.set(renderStatusComment(this.view));
    await this.updater?.flush();
  }
}
