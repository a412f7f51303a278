import type { OctokitLike } from "./octokit-client.js";
import { type CommitIdentity } from "../contracts/types.js";

export interface BotIdentity extends CommitIdentity {
  /** The app's slug, e.g. `harness`; its bot user is `<slug>[bot]`. */
  slug: string;
  /** `<slug>[bot]`, the login its comments are posted as. */
  login: string;
}

/**
 * The app's bot identity for commits: `<slug>[bot]` with the noreply address GitHub attributes
 * to the bot *user* (whose id is neither the app id nor the installation id). Looked up once.
 */
export async function fetchBotIdentity(
  appOctokit: OctokitLike,
  installationOctokit: OctokitLike,
): Promise<BotIdentity> {
  const app = await appOctokit.request("GET /app");
  const slug = app.data?.slug ?? "harness";
  const login = `${slug}[bot]`;
  try {
    const user = await installationOctokit.request("GET /users/{username}", { username: login });
    return { slug, login, name: login, email: `${String(user.data.id)}+${login}@users.noreply.github.com` };
  } catch {
    // Attribution still works without the id prefix (GitHub maps the plain noreply address).
    return { slug, login, name: login, email: `${login}@users.noreply.github.com` };
  }
}
