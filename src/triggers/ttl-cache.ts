import { RepoConfigError, type RepoConfig } from "../config/repo-config.js";

/**
 * Values read from GitHub in the last `ttlMs` (a repository's config, a person's permission),
 * so a busy repository costs one read per TTL, not one per webhook. Concurrent asks share one
 * request. Failures are not kept — the next webhook asks again — unless `keepFailure` says the
 * failure is an answer (an invalid config stays invalid until someone edits it).
 */
export class TtlCache<T> {
  private readonly entries = new Map<string, { value: Promise<T>; at: number }>();

  constructor(
    private readonly ttlMs = 30_000,
    private readonly now: () => number = Date.now,
    private readonly maxEntries = 10_000,
    private readonly keepFailure: (error: unknown) => boolean = () => false,
  ) {}

  get(key: string, load: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(key);
    if (hit && this.now() - hit.at < this.ttlMs) return hit.value;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const value = load();
    this.entries.set(key, { value, at: this.now() });
    value.catch((error: unknown) => {
      if (!this.keepFailure(error)) this.entries.delete(key);
    });
    return value;
  }
}

/**
 * A change to `.github/harness.yml` takes effect within the TTL; the worker always reads it
 * afresh. An invalid file is kept too: anyone can comment `/…`, and each comment must not cost
 * another read and parse of a file that has not changed.
 */
export class ConfigCache extends TtlCache<RepoConfig> {
  constructor(ttlMs = 30_000, now: () => number = Date.now) {
    super(ttlMs, now, 10_000, (error) => error instanceof RepoConfigError);
  }
}
