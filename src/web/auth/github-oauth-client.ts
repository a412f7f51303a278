import { z } from "zod";

/*
 * The four GitHub calls of the user-to-server flow, on github.com or GHES alike: the web host
 * serves `/login/oauth/*`, the API base serves the rest. Every answer is reduced to what the
 * caller decides on; no token ever appears in what these functions return except the one the
 * exchange produced.
 */

export interface GitHubOAuthClientOptions {
  clientId: string;
  clientSecret: string;
  /** `https://github.com` or `https://ghes.example.com`. */
  githubWebUrl: string;
  /** `https://api.github.com` or `https://ghes.example.com/api/v3`. */
  apiBaseUrl: string;
  fetch: typeof globalThis.fetch;
  /** Per request; GitHub normally answers in well under a second. */
  timeoutMs: number;
}

export type CodeExchange =
  | { ok: true; token: string; expiresInSeconds?: number }
  /** GitHub answered with an OAuth error, e.g. `bad_verification_code`. */
  | { ok: false; error: string; description?: string }
  /** GitHub could not be reached or answered something unexpected. */
  | { ok: false; status?: number };

export type RepoAccess = "yes" | "no" | "unauthorized" | { unknown: number | "network" };

const exchangeSchema = z.union([
  z.object({ access_token: z.string().min(1), expires_in: z.number().optional() }),
  z.object({ error: z.string(), error_description: z.string().optional() }),
]);

const userSchema = z.object({ login: z.string().min(1), id: z.number().int().positive() });

export function createGitHubOAuthClient(options: GitHubOAuthClientOptions) {
  const web = options.githubWebUrl.replace(/\/+$/, "");
  const api = options.apiBaseUrl.replace(/\/+$/, "");
  const headers = { "user-agent": "harness-web", accept: "application/vnd.github+json" };

  async function send(url: string, init: RequestInit): Promise<Response | undefined> {
    try {
      return await options.fetch(url, { ...init, redirect: "manual", signal: AbortSignal.timeout(options.timeoutMs) });
    } catch {
      return undefined;
    }
  }

  return {
    authorizeUrl(redirectUri: string, state: string): string {
      const query = new URLSearchParams({ client_id: options.clientId, redirect_uri: redirectUri, state });
      return `${web}/login/oauth/authorize?${query.toString()}`;
    },

    async exchangeCode(code: string, redirectUri: string): Promise<CodeExchange> {
      const body = new URLSearchParams({
        client_id: options.clientId,
        client_secret: options.clientSecret,
        code,
        redirect_uri: redirectUri,
      });
      const response = await send(`${web}/login/oauth/access_token`, {
        method: "POST",
        headers: { ...headers, accept: "application/json", "content-type": "application/x-www-form-urlencoded" },
        body: body.toString(),
      });
      if (!response) return { ok: false };
      if (!response.ok) return { ok: false, status: response.status };
      const parsed = exchangeSchema.safeParse(await response.json().catch(() => undefined));
      if (!parsed.success) return { ok: false, status: response.status };
      if ("error" in parsed.data) {
        return {
          ok: false,
          error: parsed.data.error,
          ...(parsed.data.error_description ? { description: parsed.data.error_description } : {}),
        };
      }
      return {
        ok: true,
        token: parsed.data.access_token,
        ...(parsed.data.expires_in === undefined ? {} : { expiresInSeconds: parsed.data.expires_in }),
      };
    },

    async fetchUser(token: string): Promise<{ login: string; id: number } | { status?: number }> {
      const response = await send(`${api}/user`, { headers: { ...headers, authorization: `Bearer ${token}` } });
      if (!response) return {};
      if (!response.ok) return { status: response.status };
      const parsed = userSchema.safeParse(await response.json().catch(() => undefined));
      return parsed.success ? { login: parsed.data.login, id: parsed.data.id } : { status: response.status };
    },

    /**
     * Whether the token can read the repository. A user-to-server token only sees repositories
     * both the user and the app can reach, so 200 means yes and GitHub's 404 (which hides
     * private repositories) or 403 means no. A 403 that is a rate limit says nothing about
     * access, so it is "unknown", like a 5xx.
     */
    async repoAccess(token: string, owner: string, name: string): Promise<RepoAccess> {
      const response = await send(`${api}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`, {
        headers: { ...headers, authorization: `Bearer ${token}` },
      });
      if (!response) return { unknown: "network" };
      await response.body?.cancel().catch(() => undefined);
      if (response.status === 200) return "yes";
      if (response.status === 401) return "unauthorized";
      if (response.status === 404) return "no";
      if (response.status === 403 && response.headers.get("x-ratelimit-remaining") !== "0") return "no";
      return { unknown: response.status };
    },

    /** Revokes the token at GitHub (`DELETE /applications/{client_id}/token`), so a copied cookie dies with it. */
    async revokeToken(token: string): Promise<boolean> {
      const basic = Buffer.from(`${options.clientId}:${options.clientSecret}`).toString("base64");
      const response = await send(`${api}/applications/${encodeURIComponent(options.clientId)}/token`, {
        method: "DELETE",
        headers: { ...headers, authorization: `Basic ${basic}`, "content-type": "application/json" },
        body: JSON.stringify({ access_token: token }),
      });
      await response?.body?.cancel().catch(() => undefined);
      return response?.status === 204;
    },
  };
}

export type GitHubOAuthClient = ReturnType<typeof createGitHubOAuthClient>;
