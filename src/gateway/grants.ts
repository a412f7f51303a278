import type { UpstreamName } from "./upstreams.js";

/** What the money a grant spends is counted against. */
export interface GrantScope {
  repoId: number;
  installationId: number;
}

/** The limits a grant's calls are reserved against, in US dollars. */
export interface GrantLimits {
  runUsd?: number;
  repositoryDailyUsd?: number;
  installationDailyUsd?: number;
}

/** What one run token allows: calls for one run, by one agent, to one upstream, until it expires or the run ends. */
export interface Grant {
  runId: string;
  agent: string;
  upstream: UpstreamName;
  /** Epoch ms after which the token is refused even if the run never said it ended. */
  expiresAt: number;
  /** Whose daily totals the run's spend counts in; none for a CLI run. */
  scope?: GrantScope;
  limits: GrantLimits;
}

/**
 * Where grants live, by the token's hash: memory for one process, Redis when the process that
 * serves a Daytona sandbox's calls (any behind the public address) is not the one running it.
 */
export interface GrantStore {
  put(tokenHash: string, grant: Grant): Promise<void>;
  /** The grant, or undefined when the token is unknown, revoked or expired. */
  get(tokenHash: string, now: number): Promise<Grant | undefined>;
  /** Revokes every token of the run; returns how many were live. */
  revokeRun(runId: string): Promise<number>;
  close(): Promise<void>;
}

/** Grants in this process's memory. */
export class MemoryGrantStore implements GrantStore {
  private readonly grants = new Map<string, Grant>();
  private readonly byRun = new Map<string, Set<string>>();

  put(tokenHash: string, grant: Grant): Promise<void> {
    this.grants.set(tokenHash, grant);
    const hashes = this.byRun.get(grant.runId) ?? new Set<string>();
    hashes.add(tokenHash);
    this.byRun.set(grant.runId, hashes);
    return Promise.resolve();
  }

  get(tokenHash: string, now: number): Promise<Grant | undefined> {
    const grant = this.grants.get(tokenHash);
    if (grant && grant.expiresAt <= now) {
      this.grants.delete(tokenHash);
      return Promise.resolve(undefined);
    }
    return Promise.resolve(grant);
  }

  revokeRun(runId: string): Promise<number> {
    const hashes = this.byRun.get(runId);
    this.byRun.delete(runId);
    let live = 0;
    for (const hash of hashes ?? []) if (this.grants.delete(hash)) live += 1;
    return Promise.resolve(live);
  }

  close(): Promise<void> {
    this.grants.clear();
    this.byRun.clear();
    return Promise.resolve();
  }
}
