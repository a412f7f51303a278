/**
 * What each installation granted, asked of GitHub at most once an hour per worker: an owner who
 * accepts the new permissions is believed within the hour, and a busy installation costs one
 * request an hour, not one per pull request.
 */
export class InstallationAccessCache {
  private readonly entries = new Map<number, { at: number; access: Promise<AccessGrant> }>();

  constructor(
    private readonly ttlMs = 60 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(installationId: number, load: () => Promise<AccessGrant>): Promise<AccessGrant> {
    const hit = this.entries.get(installationId);
    if (hit && this.now() - hit.at < this.ttlMs) return hit.access;
    if (this.entries.size > 10_000) this.entries.clear();
    const access = load();
    this.entries.set(installationId, { at: this.now(), access });
    access.catch(() => this.entries.delete(installationId));
    return access;
  }
}

export interface AccessGrant {
  permissions: Record<string, string>;
  events: string[];
}
