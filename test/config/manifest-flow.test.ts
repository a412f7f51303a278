import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { scratchDir } from "../helpers/git.js";
import { fakePem } from "../helpers/fake-secrets.js";

let dir: { path: string; cleanup: () => Promise<void> };
let server: HarnessServer;
let conversions: string[];

beforeEach(async () => {
  dir = await scratchDir();
  conversions = [];
  const fakeFetch = ((url: string) => {
    conversions.push(url);
    if (url.includes("/expired/")) return Promise.resolve(new Response("{}", { status: 404 }));
    return Promise.resolve(
      new Response(
        JSON.stringify({
          id: 321,
          slug: "harness-acme",
          pem: fakePem(),
          webhook_secret: "whsec",
          client_id: "Iv1.x",
          client_secret: "cs",
          html_url: "https://github.com/apps/harness-acme",
        }),
        { status: 201 },
      ),
    );
  }) as typeof fetch;
  server = await startHarnessServer(
    {
      mode: "setup",
      port: 0,
      host: "127.0.0.1",
      githubHost: "github.com",
      githubProtocol: "https",
      envFile: join(dir.path, ".env"),
    },
    { fetch: fakeFetch },
  );
});

afterEach(async () => {
  await server.close();
  await dir.cleanup();
});

/** Opens the start page as the operator would, with the setup code: the form's state and its cookie. */
async function start(): Promise<{ state: string; cookie: string; page: string }> {
  const response = await fetch(`${server.url}/?setup_code=${server.setupCode ?? ""}`);
  const page = await response.text();
  const state = /settings\/apps\/new\?state=([0-9a-f]+)"/.exec(page)?.[1] ?? "";
  const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  return { state, cookie, page };
}

/** How long /healthz takes to answer, in ms. */
async function timedHealthz(): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${server.url}/healthz`);
  expect(response.status).toBe(200);
  expect(await response.json()).toEqual({ status: "ok", mode: "setup" });
  return performance.now() - started;
}

/** GitHub sending the browser back with a registration code. */
function finish(code: string, state: string, cookie: string): Promise<Response> {
  return fetch(`${server.url}/setup?code=${code}&state=${state}`, { headers: { cookie }, redirect: "manual" });
}

describe("setup mode: registering the GitHub App from the browser", () => {
  test("/ posts a least-privilege manifest built from app.yml to GitHub", async () => {
    const { page, state, cookie } = await start();
    expect(page).toContain(`action="https://github.com/settings/apps/new?state=${state}"`);
    expect(state).toMatch(/^[0-9a-f]{48}$/);
    expect(cookie).toBe(`harness_setup_state=${state}`);
    const manifest = JSON.parse(
      (/name="manifest" value="([^"]*)"/.exec(page)?.[1] ?? "{}")
        .replace(/&quot;/g, '"')
        .replace(/&amp;/g, "&")
        .replace(/&#39;/g, "'")
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">"),
    ) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      public: false,
      default_events: [
        "issue_comment",
        "issues",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "check_suite",
        "check_run",
        "status",
      ],
      default_permissions: {
        contents: "write",
        issues: "write",
        pull_requests: "write",
        metadata: "read",
        checks: "read",
        statuses: "read",
        actions: "read",
      },
      redirect_url: `${server.url.replace("localhost", "127.0.0.1")}/setup`,
      hook_attributes: { url: `${server.url.replace("localhost", "127.0.0.1")}/api/github/webhooks` },
      callback_urls: [`${server.url.replace("localhost", "127.0.0.1")}/auth/callback`],
    });
  });

  test("/setup exchanges the code and writes the credentials to .env, keeping other lines", async () => {
    await writeFile(join(dir.path, ".env"), "# mine\nDAYTONA_API_KEY=keep-me\n");
    const { state, cookie } = await start();
    const response = await finish("abc123", state, cookie);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('href="https://github.com/apps/harness-acme/installations/new"');
    expect(conversions).toEqual(["https://api.github.com/app-manifests/abc123/conversions"]);
    const env = await readFile(join(dir.path, ".env"), "utf8");
    expect(env).toContain("# mine\nDAYTONA_API_KEY=keep-me\nAPP_ID=321\n");
    expect(env).toContain("WEBHOOK_SECRET=whsec\n");
    expect(env).toContain('PRIVATE_KEY="-----BEGIN RSA PRIVATE');
    // The run pages are ready after the restart: the OAuth client, this address, a fresh session secret.
    expect(env).toContain("GITHUB_CLIENT_ID=Iv1.x\n");
    expect(env).toContain(`HARNESS_PUBLIC_URL=${server.url.replace("localhost", "127.0.0.1")}\n`);
    expect(env).toMatch(/\nHARNESS_SESSION_SECRET=[0-9a-f]{64}\n/);
  });

  test("registering again keeps the session secret and public URL already in .env", async () => {
    await writeFile(
      join(dir.path, ".env"),
      "HARNESS_SESSION_SECRET=kept-0123456789abcdef0123456789abcdef\nHARNESS_PUBLIC_URL=https://harness.example.com\n",
    );
    const { state, cookie } = await start();
    expect((await finish("abc123", state, cookie)).status).toBe(200);
    const env = await readFile(join(dir.path, ".env"), "utf8");
    expect(env.match(/HARNESS_SESSION_SECRET=/g)).toHaveLength(1);
    expect(env).toContain("HARNESS_SESSION_SECRET=kept-0123456789abcdef0123456789abcdef\n");
    expect(env).toContain("HARNESS_PUBLIC_URL=https://harness.example.com\n");
  });

  test("a missing or odd code is a 400 with a way back", async () => {
    const response = await fetch(`${server.url}/setup?code=%3Cscript%3E`);
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('href="/"');
  });
});

describe("setup mode cannot be taken over", () => {
  test("a visitor without the setup code gets no registration to finish, and the operator with it does", async () => {
    expect(server.setupCode).toMatch(/^[A-Z2-7]{4}(-[A-Z2-7]{4}){4}$/);
    for (const visit of ["/", "/?setup_code=", `/?setup_code=${"A".repeat(20)}`, "/?setup_code=%00"]) {
      const response = await fetch(`${server.url}${visit}`);
      const page = await response.text();
      expect(response.status, visit).toBe(visit === "/" ? 200 : 403);
      expect(response.headers.get("set-cookie")).toBeNull();
      expect(page).not.toContain("state=");
      expect(page).not.toContain('name="manifest"');
      expect(page).toContain("setup code");
    }
    // Typed by hand: lower case, without the dashes.
    const typed = (server.setupCode ?? "").toLowerCase().replace(/-/g, "");
    const operator = await fetch(`${server.url}/?setup_code=${typed}`);
    expect(await operator.text()).toContain('name="manifest"');
    const { state, cookie } = await start();
    expect((await finish("abc123", state, cookie)).status).toBe(200);
    expect(await readFile(join(dir.path, ".env"), "utf8")).toContain("APP_ID=321\n");
  });

  test("each start makes a new setup code", async () => {
    const other = await startHarnessServer({
      mode: "setup",
      port: 0,
      host: "127.0.0.1",
      githubHost: "github.com",
      githubProtocol: "https",
      envFile: join(dir.path, "other.env"),
    });
    try {
      expect(other.setupCode).toBeDefined();
      expect(other.setupCode).not.toBe(server.setupCode);
      expect((await fetch(`${other.url}/?setup_code=${server.setupCode ?? ""}`)).status).toBe(403);
    } finally {
      await other.close();
    }
  });

  test("a forged Host header does not change the addresses in the manifest", async () => {
    const page = await (
      await fetch(`${server.url}/?setup_code=${server.setupCode ?? ""}`, {
        headers: { host: "attacker.example", "x-forwarded-proto": "https" },
      })
    ).text();
    expect(page).not.toContain("attacker.example");
    expect(page).toContain(`${server.url}/setup`.replace(/"/g, "&quot;"));
  });

  test(
    "a code without the state this page handed out is refused, and .env is not written; " +
      "/healthz answers throughout",
    async () => {
      for (const attempt of [
        `${server.url}/setup?code=attackers1`,
        `${server.url}/setup?code=attackers1&state=${"a".repeat(48)}`,
      ]) {
        const [response, health] = await Promise.all([
          fetch(attempt, { headers: { host: "attacker.example" } }),
          timedHealthz(),
        ]);
        expect(response.status).toBe(400);
        expect(await response.text()).toContain("not started from this page in this browser");
        expect(health).toBeLessThan(100);
      }
      expect(conversions).toEqual([]);
      await expect(readFile(join(dir.path, ".env"), "utf8")).rejects.toThrow();
    },
  );

  test("a state from another browser, or used twice, is refused", async () => {
    const victim = await start();
    const attacker = await start();
    // The attacker's own state with the victim's cookie, and the other way round.
    expect((await finish("attackers1", attacker.state, victim.cookie)).status).toBe(400);
    expect((await finish("attackers1", victim.state, attacker.cookie)).status).toBe(400);
    expect(conversions).toEqual([]);
    // A state is good once: an exchange GitHub refused used it up.
    expect((await finish("expired", victim.state, victim.cookie)).status).toBe(502);
    expect((await finish("abc123", victim.state, victim.cookie)).status).toBe(400);
  });

  test("once registered, setup refuses to run again", async () => {
    const { state, cookie } = await start();
    expect((await finish("abc123", state, cookie)).status).toBe(200);
    const again = await start();
    expect(again.page).toContain("already registered");
    expect((await finish("abc124", again.state || "x", again.cookie)).status).toBe(409);
    expect(conversions).toHaveLength(1);
  });
});

describe("an Enterprise Server over http, and a registration without a webhook secret", () => {
  test("GHE_PROTOCOL=http is used for the form and the exchange; a null secret is not written as 'null'", async () => {
    const exchanged: string[] = [];
    const gheFetch = ((url: string) => {
      exchanged.push(url);
      const app = {
        id: 9,
        slug: "harness",
        pem: fakePem(),
        webhook_secret: null,
        html_url: "http://ghe.test/apps/harness",
      };
      return Promise.resolve(new Response(JSON.stringify(app), { status: 201 }));
    }) as typeof fetch;
    const envFile = join(dir.path, "ghe.env");
    const ghe = await startHarnessServer(
      { mode: "setup", port: 0, host: "127.0.0.1", githubHost: "ghe.test", githubProtocol: "http", envFile },
      { fetch: gheFetch },
    );
    try {
      const response = await fetch(`${ghe.url}/?setup_code=${ghe.setupCode ?? ""}`);
      const page = await response.text();
      expect(page).toContain('action="http://ghe.test/settings/apps/new?state=');
      const state = /settings\/apps\/new\?state=([0-9a-f]+)"/.exec(page)?.[1] ?? "";
      const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
      const done = await fetch(`${ghe.url}/setup?code=c0de&state=${state}`, { headers: { cookie } });
      expect(exchanged).toEqual(["http://ghe.test/api/v3/app-manifests/c0de/conversions"]);
      const text = await done.text();
      expect(text).toContain("GitHub returned no webhook secret.");
      expect(text).toContain("WEBHOOK_SECRET=");
      const env = await readFile(envFile, "utf8");
      expect(env).toContain("APP_ID=9\n");
      expect(env).not.toContain("WEBHOOK_SECRET");
    } finally {
      await ghe.close();
    }
  });
});
