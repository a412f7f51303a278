import type { RepoConfig } from "../config/repo-config.js";

/** What an installation lacks for Harness to stay with its pull requests, given the repository's config. */
export interface MissingAccess {
  events: string[];
  permissions: string[];
}

const LEVELS = ["read", "write", "admin"];

/**
 * The webhook events and permissions that following a pull request needs and the installation
 * has not granted (an installation made before Harness asked for them keeps its old grant
 * until an owner accepts the new one). Only what the config turns on is asked for.
 */
export function missingFollowUpAccess(
  access: { permissions: Readonly<Record<string, string>>; events: readonly string[] },
  config: Pick<RepoConfig, "reviews" | "ci">,
): MissingAccess {
  const events = ["pull_request"];
  const permissions: [string, string][] = [];
  if (config.reviews.enabled) events.push("pull_request_review", "pull_request_review_comment");
  if (config.ci.enabled) {
    events.push("check_suite", "check_run", "status");
    permissions.push(["checks", "read"], ["statuses", "read"], ["actions", "read"]);
  }
  const has = (name: string, level: string): boolean =>
    LEVELS.indexOf(access.permissions[name] ?? "") >= LEVELS.indexOf(level);
  return {
    events: events.filter((event) => !access.events.includes(event)),
    permissions: permissions.filter(([name, level]) => !has(name, level)).map(([name, level]) => `${name}: ${level}`),
  };
}

/** One line for the status comment, or undefined when nothing is missing. */
export function missingAccessNote(missing: MissingAccess): string | undefined {
  if (missing.events.length === 0 && missing.permissions.length === 0) return undefined;
  const parts = [
    missing.events.length > 0 ? `the events ${missing.events.map((event) => `\`${event}\``).join(", ")}` : undefined,
    missing.permissions.length > 0
      ? `the permissions ${missing.permissions.map((permission) => `\`${permission}\``).join(", ")}`
      : undefined,
  ].filter((part): part is string => part !== undefined);
  return (
    `Harness cannot follow this pull request's reviews and CI yet: this installation has not granted ` +
    `${parts.join(" and ")}. An owner can accept the app's new permissions in the installation's settings.`
  );
}
