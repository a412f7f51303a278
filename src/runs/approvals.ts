/** A request from someone below the permission bar, waiting for a maintainer's `/harness approve`. */
export interface PendingApproval {
  intent: string;
  requester: { login: string; id: number };
  commentId: number;
  at: number;
}

/**
 * Pending approvals and the "you may not ask" replies already sent, so each person gets at most
 * one such reply per issue. Kept in memory here; durable deployments keep them in the run store.
 */
export class ApprovalStore {
  private readonly pending = new Map<string, PendingApproval>();
  private readonly replied = new Set<string>();

  constructor(private readonly ttlMs = 7 * 24 * 3600_000, private readonly now: () => number = Date.now) {}

  put(issue: string, approval: PendingApproval): void {
    this.pending.set(issue, approval);
  }

  /** Takes the pending request of an issue (once), if it has not expired. */
  take(issue: string): PendingApproval | undefined {
    const approval = this.pending.get(issue);
    this.pending.delete(issue);
    return approval && this.now() - approval.at <= this.ttlMs ? approval : undefined;
  }

  /** True the first time it is asked for a user on an issue: reply then, stay quiet after. */
  shouldReply(issue: string, login: string): boolean {
    const key = `${issue}\u0000${login.toLowerCase()}`;
    if (this.replied.has(key)) return false;
    this.replied.add(key);
    return true;
  }
}
