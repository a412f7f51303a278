import { MIN_SESSION_SECRET_LENGTH } from "./keys.js";
import { SettingsError } from "../../util/errors.js";

/** What `createGitHubAuth` needs from the environment (plus injected clients). */
export interface WebAuthSettings {
  clientId: string;
  clientSecret: string;
  sessionSecret: string;
  publicUrl: string;
  githubWebUrl: string;
  apiBaseUrl: string;
  /**
   * HARNESS_ADMINS: who sees the operator's pages (`/doctor`): GitHub logins (any case) or
   * numeric account ids. An id survives a rename; a login is taken over by whoever registers
   * it after its owner renames, so ids are the safer entry.
   */
  admins?: readonly string[];
}

export type WebAuthSetup = { enabled: true; settings: WebAuthSettings } | { enabled: false; reason: string };

/**
 * Sign-in (and so the run pages) is on when the GitHub App's OAuth credentials and the public
 * URL are set: GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET, HARNESS_PUBLIC_URL. Then
 * HARNESS_SESSION_SECRET is required (≥ 32 characters) and nothing is derived in its place:
 * a derived or default secret would let anyone who can read this code forge sessions.
 * Half a configuration is an error that says what to set; none is "off", with the reason.
 * The manifest flow writes the client id and secret by itself, so they alone do not turn
 * sign-in on (the process would otherwise refuse to start right after registration).
 */
export function webAuthSetupFromEnv(env: NodeJS.ProcessEnv, apiBaseUrl: string): WebAuthSetup {
  const clientId = env["GITHUB_CLIENT_ID"] || undefined;
  const clientSecret = env["GITHUB_CLIENT_SECRET"] || undefined;
  const publicUrl = env["HARNESS_PUBLIC_URL"] || undefined;
  const sessionSecret = env["HARNESS_SESSION_SECRET"] || undefined;
  if (!clientId && !clientSecret && !sessionSecret)
    return { enabled: false, reason: "GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET are not set" };
  if (!clientId || !clientSecret) {
    throw new SettingsError(
      `${clientId ? "GITHUB_CLIENT_SECRET" : "GITHUB_CLIENT_ID"} is not set: sign-in to the run pages needs both ` +
        `the GitHub App's client id and client secret (the App's settings page, "Client secrets")`,
    );
  }
  if (!publicUrl) {
    if (sessionSecret)
      throw new SettingsError(
        "HARNESS_SESSION_SECRET is set but HARNESS_PUBLIC_URL is not: " +
          "sign-in needs the URL browsers reach Harness at (its /auth/callback is the GitHub App's callback URL)",
      );
    return { enabled: false, reason: "HARNESS_PUBLIC_URL is not set" };
  }
  if (!sessionSecret) {
    throw new SettingsError(
      `HARNESS_SESSION_SECRET is not set: the run pages need it to sign session cookies ` +
        `(at least ${MIN_SESSION_SECRET_LENGTH} characters, e.g. the output of \`openssl rand -hex 32\`)`,
    );
  }
  if (sessionSecret.length < MIN_SESSION_SECRET_LENGTH) {
    throw new SettingsError(
      `HARNESS_SESSION_SECRET is too short (${String(sessionSecret.length)} characters): ` +
        `use at least ${MIN_SESSION_SECRET_LENGTH}, e.g. the output of \`openssl rand -hex 32\``,
    );
  }
  let url: URL;
  try {
    url = new URL(publicUrl);
  } catch {
    throw new SettingsError(`HARNESS_PUBLIC_URL is not a URL: "${publicUrl}"`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new SettingsError(
      `HARNESS_PUBLIC_URL must start with https:// (or http:// for local use), got "${publicUrl}"`,
    );
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "") {
    throw new SettingsError(
      `HARNESS_PUBLIC_URL must be an origin such as https://harness.example.com, without a path: ` +
        `the pages and /auth/callback are served at its root (got "${publicUrl}")`,
    );
  }
  return {
    enabled: true,
    settings: {
      clientId,
      clientSecret,
      sessionSecret,
      publicUrl: url.origin,
      githubWebUrl: githubWebUrlFor(apiBaseUrl),
      apiBaseUrl,
      admins: adminsFrom(env["HARNESS_ADMINS"]),
    },
  };
}

/** HARNESS_ADMINS as entries: comma or space separated logins and ids, checked for GitHub's shapes. */
export function adminsFrom(value: string | undefined): string[] {
  const entries = (value ?? "")
    .split(/[\s,]+/)
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== "");
  for (const entry of entries) {
    if (!/^\d{1,15}$/.test(entry) && !/^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,38}$/.test(entry))
      throw new SettingsError(
        `HARNESS_ADMINS holds "${entry.slice(0, 60)}", which is neither a GitHub login nor an account id: ` +
          `list logins or numeric ids, separated by commas`,
      );
  }
  return entries;
}

/** Whether the signed-in viewer is one of HARNESS_ADMINS, by id or by login. */
export function isAdmin(admins: readonly string[], viewer: { login: string; id: number }): boolean {
  return admins.includes(String(viewer.id)) || admins.includes(viewer.login.toLowerCase());
}

/** The web root for an API base: `https://api.github.com` → `https://github.com`; GHES `<root>/api/v3` → `<root>`. */
export function githubWebUrlFor(apiBaseUrl: string): string {
  const api = apiBaseUrl.replace(/\/+$/, "");
  const url = new URL(api);
  if (url.hostname === "api.github.com") return "https://github.com";
  // GHE.com data residency: api.<sub>.ghe.com serves the API, <sub>.ghe.com the web.
  if (url.hostname.startsWith("api.") && url.hostname.endsWith(".ghe.com"))
    return `${url.protocol}//${url.host.slice("api.".length)}`;
  return api.replace(/\/api\/v3$/, "");
}
