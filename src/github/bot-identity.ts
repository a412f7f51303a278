import type { OctokitLike } from "./octokit-client.js";
import { type CommitIdentity } from "../contracts/types.js";

/**
 * Who commits are by when no App identity is known (the CLI): `harness` at the noreply domain of
 * the GitHub at `serverUrl`, never a real mailbox.
 */
export function defaultCommitIdentity(serverUrl: string | undefined): CommitIdentity {
  return { name: "harness", email: `harness@${noreplyDomain(serverUrl ?? "https://github.com")}` };
}

export interface BotIdentity extends CommitIdentity {
  /** The app's slug, e.g. `harness`; its bot user is `<slug>[bot]`. */
  slug: string;
  /** `<slug>[bot]`, the login its comments are posted as. */
  login: string;
}

/**
 * The app's bot identity for commits: `<slug>[bot]` with the noreply address GitHub attributes
 * to the bot *user* (whose id is neither the app id nor the installation id). Looked up once.
 * `serverUrl` is the GitHub the repository lives on (its web origin), which decides the
 * noreply domain.
 */
export async function fetchBotIdentity(
  appOctokit: OctokitLike,
  installationOctokit: OctokitLike,
  serverUrl = "https://github.com",
): Promise<BotIdentity> {
  const app = await appOctokit.request("GET /app");
  const slug = app.data?.slug ?? "harness";
  const login = `${slug}[bot]`;
  const domain = noreplyDomain(serverUrl);
  try {
    const user = await installationOctokit.request("GET /users/{username}", { username: login });
    return { slug, login, name: login, email: `${String(user.data.id)}+${login}@${domain}` };
  } catch {
    // Attribution still works without the id prefix (GitHub maps the plain noreply address).
    return { slug, login, name: login, email: `${login}@${domain}` };
  }
}

/**
 * Where a GitHub gives its users noreply addresses: `users.noreply.github.com` on github.com,
 * `users.noreply.ghe.com` for every GitHub Enterprise Cloud tenant (`<tenant>.ghe.com`), and
 * `users.noreply.<hostname>` on an Enterprise Server instance. An address under github.com's
 * domain is attributed to nobody on a GHES instance, so the bot's commits would show no author.
 */
export function noreplyDomain(serverUrl: string): string {
  let host: string;
  try {
    host = new URL(serverUrl).hostname.toLowerCase();
  } catch {
    return "users.noreply.github.com";
  }
  if (host === "github.com" || host === "www.github.com" || host === "api.github.com")
    return "users.noreply.github.com";
  if (host === "ghe.com" || host.endsWith(".ghe.com")) return "users.noreply.ghe.com";
  return `users.noreply.${host}`;
}
