import type { ConfigCapableOctokit } from "../config/load-repo-config.js";
import type { OctokitLike } from "../github/octokit-client.js";
import { createTokenMinter, type TokenMinter } from "../github/tokens.js";

/** What Probot gives every host of the app: a client for the app (JWT) or one installation. */
export interface AppAuth {
  auth(installationId?: number): Promise<unknown>;
}

/** The worker's GitHub: installation clients, the app client, and short-lived tokens. */
export interface WorkerGitHub {
  installationOctokit(installationId: number): Promise<OctokitLike & ConfigCapableOctokit>;
  appOctokit(): Promise<OctokitLike>;
  tokens: TokenMinter;
}

/**
 * The worker's GitHub from the host's Probot. Tokens are minted through a fresh app client each
 * time, so a JWT never outlives its ten minutes.
 */
export function workerGitHub(probot: AppAuth, apiBaseUrl: string): WorkerGitHub {
  const appOctokit = async (): Promise<OctokitLike> => (await probot.auth()) as OctokitLike;
  return {
    installationOctokit: async (installationId) =>
      (await probot.auth(installationId)) as OctokitLike & ConfigCapableOctokit,
    appOctokit,
    tokens: {
      mint: async (request) => createTokenMinter(await appOctokit(), apiBaseUrl).mint(request),
      revoke: async (token) => createTokenMinter(await appOctokit(), apiBaseUrl).revoke(token),
    },
  };
}
