import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseYaml } from "yaml";
import { isSetupCode } from "./setup-code.js";

export interface ManifestFlowOptions {
  /** `github.com` or a GitHub Enterprise Server host. */
  githubHost: string;
  /** GHE_PROTOCOL for an Enterprise Server host (default `https`; github.com is always https). */
  githubProtocol?: "https" | "http";
  /** Register on this organisation instead of the signed-in user. */
  org?: string;
  /** Where the credentials are written (`.env`). */
  envFile: string;
  /** `app.yml`, the manifest's source. */
  manifestFile?: string;
  fetch?: typeof globalThis.fetch;
  /**
   * The address people reach Harness at, from configuration (HARNESS_PUBLIC_URL) or where it
   * listens — never the request's `Host` header, which whoever sends the request chooses.
   */
  baseUrl: () => string;
  /**
   * The setup code printed on the console at start: the start page hands out a registration
   * only to someone who gives it, so a visitor who reaches the port cannot register their own
   * App in the operator's `.env`.
   */
  setupCode: string;
  now?: () => number;
}

/** How long a registration started at `/` may take to come back. GitHub's codes last an hour. */
const STATE_TTL_MS = 60 * 60_000;
const STATE_COOKIE = "harness_setup_state";

/**
 * Registers the GitHub App from the browser (GitHub's manifest flow), for a first start with
 * no credentials: `/`, given the setup code, posts the manifest built from app.yml to GitHub, GitHub redirects back
 * to `/setup?code=…`, and the code is exchanged for the app's id, key and webhook secret,
 * which are written to `.env`. Restarting then starts the app proper.
 */
export function createManifestFlow(options: ManifestFlowOptions) {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const now = options.now ?? Date.now;
  // States handed out at `/`, each good once: only a registration this page started, in the
  // browser that started it (the cookie), can finish.
  const states = new Map<string, number>();
  const issueState = (): string => {
    for (const [state, expires] of states) if (expires <= now()) states.delete(state);
    // Bounded: a flood of page loads cannot grow this without end.
    if (states.size >= 100) states.delete(states.keys().next().value ?? "");
    const state = randomBytes(24).toString("hex");
    states.set(state, now() + STATE_TTL_MS);
    return state;
  };
  const takeState = (state: string | null, cookie: string | undefined): boolean => {
    if (!state || state !== cookie) return false;
    const expires = states.get(state);
    states.delete(state);
    return expires !== undefined && expires > now();
  };
  const dotCom = options.githubHost === "github.com";
  const protocol = dotCom ? "https" : (options.githubProtocol ?? "https");
  const web = `${protocol}://${options.githubHost}`;
  const api = dotCom ? "https://api.github.com" : `${protocol}://${options.githubHost}/api/v3`;

  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (req.method !== "GET") return false;
    const base = options.baseUrl().replace(/\/+$/, "");
    if ((url.pathname === "/" || url.pathname === "/setup") && (await alreadyRegistered(options.envFile))) {
      html(
        res,
        409,
        page(
          "Harness is already registered",
          `<p>${escapeHtml(options.envFile)} already holds an <code>APP_ID</code>: ` +
            `restart Harness to run the app. ` +
            `To register a new app, remove <code>APP_ID</code> from it first.</p>`,
        ),
      );
      return true;
    }
    if (url.pathname === "/" && !isSetupCode(url.searchParams.get("setup_code"), options.setupCode)) {
      const tried = url.searchParams.has("setup_code");
      html(
        res,
        tried ? 403 : 200,
        page(
          "Register Harness",
          `<p>${tried ? "That is not the setup code. " : ""}Enter the setup code Harness printed on its ` +
            `console when it started (it is shown nowhere else), or open the link printed beside it.</p>
        <form action="/" method="get">
          <input name="setup_code" autocomplete="off" size="30" aria-label="Setup code">
          <button type="submit">Continue</button>
        </form>`,
        ),
      );
      return true;
    }
    if (url.pathname === "/") {
      const manifest = await buildManifest(options.manifestFile ?? "app.yml", base);
      const state = issueState();
      const action =
        (options.org
          ? `${web}/organizations/${encodeURIComponent(options.org)}/settings/apps/new`
          : `${web}/settings/apps/new`) + `?state=${state}`;
      res.setHeader(
        "set-cookie",
        `${STATE_COOKIE}=${state}; HttpOnly; SameSite=Lax; Path=/setup; ` +
          `Max-Age=${String(STATE_TTL_MS / 1000)}${base.startsWith("https:") ? "; Secure" : ""}`,
      );
      html(
        res,
        200,
        page(
          "Register Harness",
          `
        <p>Harness has no GitHub App credentials yet. ` +
            `Register it as a GitHub App on ${escapeHtml(options.githubHost)}` +
            `${options.org ? ` for the organisation <b>${escapeHtml(options.org)}</b>` : ""}:
        GitHub shows the permissions it asks for (contents, issues, pull requests: write; metadata: read) ` +
            `before anything is created.</p>
        <form action="${escapeHtml(action)}" method="post">
          <input type="hidden" name="manifest" value="${escapeHtml(manifest)}">
          <button type="submit">Register the GitHub App</button>
        </form>`,
        ),
      );
      return true;
    }
    if (url.pathname === "/setup") {
      const code = url.searchParams.get("code");
      if (!code || !/^[A-Za-z0-9_-]{1,100}$/.test(code)) {
        html(
          res,
          400,
          page(
            "Registration failed",
            '<p>GitHub did not send a registration code. Start again from <a href="/">the start page</a>.</p>',
          ),
        );
        return true;
      }
      if (!takeState(url.searchParams.get("state"), cookieValue(req, STATE_COOKIE))) {
        html(
          res,
          400,
          page(
            "Registration failed",
            "<p>This registration was not started from this page in this browser " +
              "(or it was started over an hour ago). " +
              'Start again from <a href="/">the start page</a>.</p>',
          ),
        );
        return true;
      }
      const response = await fetchImpl(`${api}/app-manifests/${code}/conversions`, {
        method: "POST",
        headers: { accept: "application/vnd.github+json", "user-agent": "harness-setup" },
      });
      if (!response.ok) {
        html(
          res,
          502,
          page(
            "Registration failed",
            `<p>GitHub answered ${String(response.status)} when exchanging the code. ` +
              `Codes expire after an hour: start again from <a href="/">the start page</a>.</p>`,
          ),
        );
        return true;
      }
      const app = (await response.json()) as {
        id: number;
        pem: string;
        webhook_secret: string | null;
        client_id?: string;
        client_secret?: string;
        html_url: string;
        slug?: string;
      };
      const existing = await readFile(options.envFile, "utf8").catch(() => "");
      const has = (name: string): boolean => new RegExp(`^\\s*${name}\\s*=\\s*\\S`, "m").test(existing);
      await updateEnvFile(options.envFile, {
        APP_ID: String(app.id),
        PRIVATE_KEY: JSON.stringify(app.pem),
        // GitHub's description allows a null secret; writing "null" would make it the secret.
        ...(app.webhook_secret ? { WEBHOOK_SECRET: app.webhook_secret } : {}),
        ...(app.client_id ? { GITHUB_CLIENT_ID: app.client_id } : {}),
        ...(app.client_secret ? { GITHUB_CLIENT_SECRET: app.client_secret } : {}),
        // With these the run pages are on after the restart, at the address used to register.
        // A session secret already there is kept: replacing it would sign everyone out.
        ...(app.client_id && !has("HARNESS_PUBLIC_URL") ? { HARNESS_PUBLIC_URL: base } : {}),
        ...(app.client_id && !has("HARNESS_SESSION_SECRET")
          ? { HARNESS_SESSION_SECRET: randomBytes(32).toString("hex") }
          : {}),
      });
      html(
        res,
        200,
        page(
          "Harness is registered",
          `
        <p>The GitHub App <b>${escapeHtml(app.slug ?? String(app.id))}</b> is registered ` +
            `and its credentials are in <code>${escapeHtml(options.envFile)}</code>.</p>
        ${app.webhook_secret ? "" : noSecretWarning(options.envFile, app.html_url)}
        <ol><li>Restart Harness (<code>npm start</code>) so it picks them up.</li>
        <li><a href="${escapeHtml(app.html_url)}/installations/new">Install the app</a> ` +
            `on the repositories it should work on.</li></ol>`,
        ),
      );
      return true;
    }
    return false;
  };
}

async function buildManifest(path: string, baseUrl: string): Promise<string> {
  const raw = parseYaml(await readFile(path, "utf8")) as Record<string, unknown>;
  const hook = (raw["hook_attributes"] as Record<string, unknown> | undefined) ?? {};
  const webhookUrl = process.env["WEBHOOK_PROXY_URL"] ?? `${baseUrl}/api/github/webhooks`;
  return JSON.stringify({
    ...raw,
    url: raw["url"] ?? baseUrl,
    hook_attributes: { ...hook, url: webhookUrl },
    redirect_url: `${baseUrl}/setup`,
    // Where GitHub sends people back after signing in to the run pages.
    callback_urls: [`${baseUrl}/auth/callback`],
    public: raw["public"] ?? false,
  });
}

/** Sets keys in a dotenv file, keeping every other line as it was. */
export async function updateEnvFile(path: string, values: Record<string, string>): Promise<void> {
  const existing = await readFile(path, "utf8").catch(() => "");
  const lines = existing === "" ? [] : existing.replace(/\n$/, "").split("\n");
  const remaining = new Map(Object.entries(values));
  const updated = lines.map((line) => {
    const name = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(line)?.[1];
    if (name && remaining.has(name)) {
      const value = remaining.get(name) ?? "";
      remaining.delete(name);
      return `${name}=${value}`;
    }
    return line;
  });
  for (const [name, value] of remaining) updated.push(`${name}=${value}`);
  await writeFile(path, `${updated.join("\n")}\n`, { mode: 0o600 });
}

async function alreadyRegistered(envFile: string): Promise<boolean> {
  const existing = await readFile(envFile, "utf8").catch(() => "");
  return /^\s*APP_ID\s*=\s*\S/m.test(existing);
}

function cookieValue(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}

function html(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "text/html; charset=utf-8" }).end(body);
}

function page(title: string, content: string): string {
  return (
    `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>` +
    `<body style="font-family:system-ui;max-width:40rem;margin:3rem auto">` +
    `<h1>${escapeHtml(title)}</h1>${content}</body></html>`
  );
}

export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char] ?? char,
  );
}

/**
 * GitHub registered the app without a webhook secret. Harness verifies every delivery with one
 * and will not start without it, so the operator must set one on both sides.
 */
function noSecretWarning(envFile: string, appUrl: string): string {
  return (
    `<p><b>GitHub returned no webhook secret.</b> Choose one (for example <code>openssl rand -hex 32</code>), ` +
    `enter it under <i>Webhook secret</i> in <a href="${escapeHtml(appUrl)}">the app's settings</a>, ` +
    `and add it to <code>${escapeHtml(envFile)}</code> as <code>WEBHOOK_SECRET=…</code>. ` +
    `Harness will not start without it: it verifies every delivery with that secret.</p>`
  );
}
