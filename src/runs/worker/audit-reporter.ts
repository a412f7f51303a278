import type { AuditEntry, AuditLog } from "../../audit/audit-log.js";
import type { HarnessEvent, Reporter } from "../../contracts/events.js";
import type { TokenMinter } from "../../github/tokens.js";
import { describeError } from "../../util/errors.js";
import type { Log } from "../../util/log.js";
import type { RunRequest } from "../request.js";

type Entry = Omit<AuditEntry, "at" | "repo" | "issue" | "runId" | "installationId">;

/**
 * The worker's side of the audit trail, for one run: every token it mints (permissions and
 * repository, never the token), the branch and commit it pushes, the pull request it opens or
 * updates, and how the run ended. Recording never holds up or fails the run.
 */
export class RunAudit {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly audit: AuditLog,
    private readonly request: RunRequest,
    private readonly log: Log,
  ) {}

  record(entry: Entry): void {
    const { request } = this;
    const write = this.audit
      .record({
        ...entry,
        repo: `${request.repo.owner}/${request.repo.name}`,
        issue: request.issue.number,
        runId: request.runId,
        installationId: request.installationId,
      })
      .catch((error: unknown) => {
        this.log.warn({ err: describeError(error), action: entry.action }, "could not record an audit entry");
      })
      .finally(() => this.pending.delete(write));
    this.pending.add(write);
  }

  /** A minter that records each token it mints. */
  tokens(inner: TokenMinter): TokenMinter {
    return {
      mint: async (mintRequest) => {
        const minted = await inner.mint(mintRequest);
        this.record({
          action: "token.minted",
          details: {
            // What GitHub granted, which may be less than was asked.
            permissions: Object.entries(minted.permissions)
              .map(([name, level]) => `${name}:${level}`)
              .sort(),
            repositories: [`${this.request.repo.owner}/${this.request.repo.name}`],
            ...(minted.expiresAt ? { expiresAt: minted.expiresAt } : {}),
          },
        });
        return minted;
      },
      revoke: (token) => inner.revoke(token),
    };
  }

  /** Pushes, pull requests and the end of the run, from the harness's own events. */
  reporter(branch: string): Reporter {
    return {
      emit: (event: HarnessEvent) => {
        if (event.type === "push.finished" && event.result.pushed) {
          this.record({
            action: "branch.pushed",
            details: { branch, ...(event.result.commitSha ? { commit: event.result.commitSha } : {}) },
          });
          if (event.result.prUrl) this.pullRequest(event.result.prUrl, event.result.prReused === true);
        }
        if (event.type === "run.finished")
          this.record({
            action: "run.finished",
            details: {
              state: event.report.status,
              ...(event.report.pushResult?.errorKind ? { errorKind: event.report.pushResult.errorKind } : {}),
            },
          });
      },
      close: () => this.settled(),
    };
  }

  pullRequest(url: string, reused: boolean): void {
    const number = Number(/\/pull\/(\d+)/.exec(url)?.[1] ?? "0");
    this.record({
      action: reused ? "pull_request.updated" : "pull_request.opened",
      details: { url, ...(number > 0 ? { number } : {}) },
    });
  }

  async settled(): Promise<void> {
    await Promise.all([...this.pending]);
  }
}
