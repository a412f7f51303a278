import { Octokit } from "@octokit/core";
import type { OctokitLike } from "./octokit-client.js";

/** Permissions asked of a minted token (a subset of what the installation was granted). */
export type TokenPermissions = Record<string, "read" | "write">;

export interface MintedToken {
  token: string;
  /** ISO-8601 expiry GitHub reported (tokens live one hour). */
  expiresAt: string;
  /** What GitHub actually granted (may be less than asked when the installation lacks some). */
  permissions: Record<string, string>;
}

/**
 * Short-lived, single-repository installation tokens. The worker mints a read-only one for the
 * clone and a contents-write one just before the push, and revokes each right after use, so no
 * token outlives its step and an hour-long run never pushes with an expired token.
 */
export interface TokenMinter {
  mint(request: { installationId: number; repositoryId: number; permissions: TokenPermissions }): Promise<MintedToken>;
  revoke(token: string): Promise<void>;
}

/**
 * Mints through the app (JWT) client with an explicit REST call: Octokit's `auth({ type:
 * "installation", repositoryIds })` ignores GHE_HOST, and
 * revokes with a client that carries only the token being revoked, since an authenticated
 * Octokit's hook would swap in its cached token and revoke that one instead.
 */
export function createTokenMinter(appOctokit: OctokitLike, apiBaseUrl: string): TokenMinter {
  return {
    async mint({ installationId, repositoryId, permissions }) {
      const response = await appOctokit.request("POST /app/installations/{installation_id}/access_tokens", {
        installation_id: installationId,
        repository_ids: [repositoryId],
        permissions,
      });
      return {
        token: response.data.token,
        expiresAt: response.data.expires_at,
        permissions: { ...(response.data.permissions as Record<string, string>) },
      };
    },
    async revoke(token) {
      const plain = new Octokit({ baseUrl: apiBaseUrl, userAgent: "harness" });
      await plain.request("DELETE /installation/token", { headers: { authorization: `token ${token}` } });
    },
  };
}
