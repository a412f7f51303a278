/** The authorise step commands, labels and reviews share: the repository's config, the sender's permission, bots. */
import { loadRepoConfig } from "../config/load-repo-config.js";
import { permissionLevelOf, RepoConfigError, type PermissionLevel, type RepoConfig } from "../config/repo-config.js";
import { type OctokitLike } from "../github/octokit-client.js";
import { collaboratorPermission } from "../github/repository.js";
import { issueKeyOf } from "../runs/request.js";
import { parseCommand } from "./command.js";
import type { ConfigCache } from "./ttl-cache.js";
import {
  installationOf,
  names,
  record,
  reply,
  replyOnce,
  type HandlerDeps,
  type Issue,
  type Repo,
  type WebhookContext,
} from "./context.js";

/** Records a refusal for want of permission, and says it once per person, issue and window. */
export async function refuseBelowBar(
  context: WebhookContext,
  deps: HandlerDeps,
  at: { repository: Repo; issueNumber: number; login: string },
  details: Record<string, string>,
  body: string,
): Promise<void> {
  await record(context, deps, {
    action: "request.refused",
    repo: at.repository.full_name,
    issue: at.issueNumber,
    actor: at.login,
    installationId: installationOf(context.payload),
    details: { reason: "permission", ...details },
  });
  const key = issueKeyOf(at.repository.id, at.issueNumber);
  await replyOnce(context, deps, at.repository, at.issueNumber, `refused:${key}`, at.login, body);
}

export function cachedPermission(
  octokit: OctokitLike,
  deps: HandlerDeps,
  repoId: number,
  owner: string,
  repo: string,
  login: string,
): Promise<PermissionLevel> {
  const load = () => fetchPermission(octokit, owner, repo, login);
  return deps.permissionCache ? deps.permissionCache.get(`${String(repoId)}:${login.toLowerCase()}`, load) : load();
}

/** The repository config, or undefined after telling the issue why it is invalid (for commands only). */
export async function loadConfigOrReport(
  context: WebhookContext,
  repository: Repo,
  issue: Issue,
  commentBody: string | undefined,
  cache?: ConfigCache,
): Promise<RepoConfig | undefined> {
  const { owner, repo } = names(repository);
  try {
    const load = () => loadRepoConfig(context.octokit, owner, repo);
    return await (cache ? cache.get(String(repository.id), load) : load());
  } catch (error) {
    if (error instanceof RepoConfigError) {
      // Only answer what was plainly meant for Harness; other slash commands stay untouched.
      if (commentBody === undefined || parseCommand(commentBody) !== undefined) {
        await reply(
          context,
          repository,
          issue.number,
          `Harness cannot run here: ${error.message}. Fix the file on the default branch and ask again.`,
        );
      }
      context.log.warn({ problems: error.problems }, "invalid .github/harness.yml");
      return undefined;
    }
    throw error;
  }
}

async function fetchPermission(
  octokit: OctokitLike,
  owner: string,
  repo: string,
  username: string,
): Promise<PermissionLevel> {
  // Not a collaborator means no permission; any other failure is thrown, a failure to decide.
  const access = await collaboratorPermission(octokit, { owner, name: repo }, username);
  return permissionLevelOf(access);
}

export function isIgnoredBot(
  sender: { login: string; type: string },
  author: { login: string; type: string } | null,
  config: RepoConfig,
): boolean {
  const bot = sender.type === "Bot" || author?.type === "Bot" || sender.login.endsWith("[bot]");
  return bot && !config.allowed_bots.includes(sender.login);
}
