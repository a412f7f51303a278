import type { GitHubRepo } from "../../util/github.js";

/**
 * Repositories that refused a draft pull request, so later runs open theirs ready for review at
 * once instead of asking GitHub again. Kept in the worker's memory, bounded and aged: a plan can
 * change, a forgotten entry costs only one refused request, and a fleet's other workers learn
 * the same way on their first run.
 */
export class DraftRefusals {
  private readonly refusedAt = new Map<string, number>();

  constructor(private readonly options: { maxRepositories?: number; ttlMs?: number; now?: () => number } = {}) {}

  has(repo: GitHubRepo): boolean {
    const key = keyOf(repo);
    const at = this.refusedAt.get(key);
    if (at === undefined) return false;
    if (this.now() - at > (this.options.ttlMs ?? DAY_MS)) {
      this.refusedAt.delete(key);
      return false;
    }
    return true;
  }

  remember(repo: GitHubRepo): void {
    const key = keyOf(repo);
    this.refusedAt.delete(key);
    this.refusedAt.set(key, this.now());
    const max = this.options.maxRepositories ?? 10_000;
    // A Map iterates in insertion order, so the first key is the oldest refusal.
    for (const oldest of this.refusedAt.keys()) {
      if (this.refusedAt.size <= max) break;
      this.refusedAt.delete(oldest);
    }
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

function keyOf(repo: GitHubRepo): string {
  return `${repo.owner}/${repo.name}`.toLowerCase();
}
