import { createProbotAuth } from "octokit-auth-probot";
import type { EventClient, FallbackClient, InstallationToken } from "./event-client.js";
import { SERVER_ERROR_RETRY, serverErrorWait } from "./retry-runner.js";

/*
 * Probot's auth strategy (octokit-auth-probot), with one change: the client Probot asks for when
 * an event arrives (`auth({ type: "event-octokit", event })`, which becomes `context.octokit`) is
 * the light event client (event-client.ts) instead of a new Octokit. Every other use — the
 * app's own client, `probot.auth(installationId)` for the worker, token exchanges — is Probot's
 * strategy unchanged. Events with no installation, or for an installation being suspended or
 * deleted, keep Probot's answer (an unauthenticated client that says why).
 */

interface EventAuthOptions {
  type: string;
  event?: { name?: string; payload?: { action?: unknown; installation?: { id?: unknown } } };
  installationId?: number;
}

type ProbotAuth = ReturnType<typeof createProbotAuth>;
type StrategyOptions = Parameters<typeof createProbotAuth>[0];

export type EventClientFactory = (installationId: number, fallback: FallbackClient) => EventClient;

/** An Octokit `authStrategy` that hands webhook handlers event clients made by `clients`. */
export function eventClientAuth(
  clients: (token: (installationId: number) => Promise<InstallationToken>) => EventClientFactory,
): (options: StrategyOptions) => ProbotAuth {
  return (strategyOptions) => {
    const probotAuth = createProbotAuth(strategyOptions);
    // Only the app's own strategy mints installation tokens; a token-authenticated client keeps Probot's.
    if (!("appId" in strategyOptions)) return probotAuth;
    // Probot hands the strategy a `request` without the base URL (its clients' own requests carry
    // it when a token is minted on their way out); minting one here needs it, for GHES.
    const { request, octokitOptions } = strategyOptions as {
      request?: { defaults(options: { baseUrl: string }): unknown };
      octokitOptions?: { baseUrl?: string };
    };
    const minting =
      request && octokitOptions?.baseUrl
        ? createProbotAuth({
            ...strategyOptions,
            request: request.defaults({ baseUrl: octokitOptions.baseUrl }),
          } as StrategyOptions)
        : probotAuth;
    const token = async (installationId: number): Promise<InstallationToken> => {
      const auth = (await mintRetryingServerErrors(() => minting({ type: "installation", installationId }))) as {
        token?: unknown;
        createdAt?: unknown;
      };
      if (typeof auth.token !== "string")
        throw new Error(`no installation token for installation ${String(installationId)}`);
      return {
        token: auth.token,
        createdAt: typeof auth.createdAt === "string" ? auth.createdAt : new Date(0).toISOString(),
      };
    };
    const forInstallation = clients(token);
    const auth = (options: EventAuthOptions): Promise<unknown> => {
      const installationId = options.event?.payload?.installation?.id;
      const action = String(options.event?.payload?.action);
      const revoked = options.event?.name === "installation" && (action === "suspend" || action === "deleted");
      if (options.type !== "event-octokit" || typeof installationId !== "number" || revoked)
        return probotAuth(options as Parameters<ProbotAuth>[0]);
      const fallback: FallbackClient = () =>
        probotAuth(options as Parameters<ProbotAuth>[0]) as ReturnType<FallbackClient>;
      return Promise.resolve(forInstallation(installationId, fallback));
    };
    return Object.assign(auth, { hook: probotAuth.hook }) as unknown as ProbotAuth;
  };
}

/** Retries of a token exchange: the app's server-error policy, its waits a quarter second a unit. */
const TOKEN_RETRY = { ...SERVER_ERROR_RETRY, unitMs: 250 };

/**
 * The token exchange runs on Probot's bare request, which retries nothing: every handler waiting
 * for an installation's first token shares the one exchange, so a single 502 from GitHub would
 * drop all of their webhooks unanswered. Server errors are tried again as the app's clients try
 * them (serverErrorWait), on a shorter clock; anything else (a suspended installation, a wrong
 * key) is the answer.
 */
async function mintRetryingServerErrors<T>(mint: () => Promise<T>): Promise<T> {
  for (let retries = 0; ; retries += 1) {
    try {
      return await mint();
    } catch (error) {
      const wait = serverErrorWait(error, retries, TOKEN_RETRY);
      if (wait === undefined) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait * TOKEN_RETRY.unitMs));
    }
  }
}
