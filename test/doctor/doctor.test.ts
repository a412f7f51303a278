import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { readManifest, type AppManifest } from "../../src/doctor/context.js";
import { runDoctor, type DoctorOptions } from "../../src/doctor/doctor.js";
import { renderText } from "../../src/doctor/render.js";
import type { CheckReport } from "../../src/doctor/runner.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startFakeGitHub, type FakeApp, type FakeGitHub, type Permissions } from "../fakes/github/server.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import { fakePemLines, fakeToken } from "../helpers/fake-secrets.js";
import { Redis } from "ioredis";
import { testRedisUrl } from "../helpers/redis.js";

/*
 * `harness doctor` against a set-up made of fakes on 127.0.0.1: the fake GitHub (the App, its
 * installations and webhook deliveries), the fake Daytona, the suite's own Redis, a scripted
 * model server and fake agent CLIs. A healthy set-up passes every check; each broken piece
 * fails exactly its own check, with its fix, and nothing hangs.
 */

let github: FakeGitHub;
let app: FakeApp;
let daytona: FakeDaytona;
let models: ModelServer;
let manifest: AppManifest;
let root: string;
let bin: string;

const ANTHROPIC_KEY = fakeToken("sk-ant-api03-", 40);
const WEBHOOK_SECRET = fakeToken("whsec-", 24);

beforeAll(async () => {
  manifest = await readManifest(new URL("../../app.yml", import.meta.url));
  github = await startFakeGitHub();
  app = github.addApp({
    id: 4242,
    slug: "harness-doctor",
    permissions: permissions(manifest.permissions),
    events: manifest.events,
  });
  github.addInstallation({ account: "acme" });
  daytona = await startFakeDaytona({ apiKey: fakeToken("dtn_", 32) });
  models = await startModelServer({ script: [] });
  root = await mkdtemp(join(tmpdir(), "harness-doctor-"));
  // Readable by the sandbox user too: it is one of the sandbox's read-only paths.
  await chmod(root, 0o755);
  bin = join(root, "bin");
  await mkdir(bin, { mode: 0o755 });
  for (const [program, version] of [
    ["claude", "2.0.1 (Claude Code)"],
    ["codex", "codex-cli 0.50.0"],
    ["pi", "0.9.0"],
  ] as const) {
    await writeFile(join(bin, program), `#!/bin/sh\necho "${version}"\n`, { mode: 0o755 });
  }
});

afterAll(async () => {
  await github.close();
  await daytona.close();
  await models.close();
  await rm(root, { recursive: true, force: true });
});

/** The environment of a healthy App: every check applies and passes. */
function healthyEnv(changes: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: `${bin}:/usr/bin:/bin`,
    HOME: root,
    APP_ID: String(app.id),
    PRIVATE_KEY: app.privateKeyPem,
    WEBHOOK_SECRET,
    GHE_HOST: github.host,
    GHE_PROTOCOL: "http",
    HARNESS_SANDBOX: "local",
    HARNESS_SANDBOXES: "local,daytona",
    HARNESS_SANDBOX_READONLY_PATHS: bin,
    DAYTONA_API_KEY: daytona.apiKey,
    DAYTONA_API_URL: daytona.apiUrl,
    HARNESS_QUEUE: "bullmq",
    REDIS_URL: testRedisUrl(),
    HARNESS_REDIS_PREFIX: "doctor-test",
    HARNESS_REPO_CACHE: join(root, "cache"),
    ANTHROPIC_API_KEY: ANTHROPIC_KEY,
    ANTHROPIC_BASE_URL: models.url,
    ...(process.env["HARNESS_BWRAP"] ? { HARNESS_BWRAP: process.env["HARNESS_BWRAP"] } : {}),
    ...(process.env["HARNESS_SANDBOX_USER"] ? { HARNESS_SANDBOX_USER: process.env["HARNESS_SANDBOX_USER"] } : {}),
  };
  return Object.fromEntries(
    Object.entries({ ...env, ...changes }).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}

async function doctor(env: NodeJS.ProcessEnv, options: DoctorOptions = {}): Promise<CheckReport[]> {
  return runDoctor(env, { minFreeBytes: 1, ...options });
}

function failures(reports: readonly CheckReport[]): CheckReport[] {
  return reports.filter((report) => report.status === "fail");
}

function report(reports: readonly CheckReport[], id: string): CheckReport {
  const found = reports.find((candidate) => candidate.id === id);
  if (!found) throw new Error(`no check ${id} in ${reports.map((candidate) => candidate.id).join(", ")}`);
  return found;
}

/** Every secret of the environment, none of which may appear in what the doctor prints. */
function secretsOf(env: NodeJS.ProcessEnv): string[] {
  return [env["PRIVATE_KEY"], env["WEBHOOK_SECRET"], env["DAYTONA_API_KEY"], env["ANTHROPIC_API_KEY"]].filter(
    (value): value is string => value !== undefined,
  );
}

function expectNoSecrets(text: string, env: NodeJS.ProcessEnv): void {
  for (const secret of secretsOf(env)) expect(text).not.toContain(secret.trim().split("\n")[1] ?? secret);
}

describe("harness doctor", () => {
  it("passes every check of a healthy set-up", async () => {
    const env = healthyEnv();
    const reports = await doctor(env);
    expect(renderText(reports)).toContain("All 15 checks passed or do not apply.");
    // Docker is the one sandbox this set-up does not use (its own tests start an engine).
    expect(reports.filter((candidate) => candidate.status !== "ok")).toEqual([
      expect.objectContaining({ id: "docker", status: "skip", detail: "not used (runs go to local, daytona)" }),
    ]);
    expect(report(reports, "github-app").detail).toContain("harness-doctor (App 4242)");
    expect(report(reports, "github-installations").detail).toContain("1 installation");
    expect(report(reports, "agent-claude-code").detail).toContain("2.0.1 (Claude Code)");
    expect(report(reports, "local-sandbox").detail).toContain("ran a command isolated");
    expect(report(reports, "model-upstreams").detail).toContain("anthropic");
    expectNoSecrets(JSON.stringify(reports), env);
  });

  it("names the permission an installation has not granted, and where its owner accepts it", async () => {
    const granted = Object.entries(manifest.permissions).filter(([name]) => name !== "checks");
    const partial = github.addInstallation({
      account: "globex",
      permissions: permissions(Object.fromEntries(granted)),
    });
    try {
      const reports = await doctor(healthyEnv());
      expect(failures(reports).map((candidate) => candidate.id)).toEqual(["github-installations"]);
      const installations = report(reports, "github-installations");
      expect(installations.detail).toBe(`globex (installation ${String(partial.id)}) has not granted checks: read`);
      expect(installations.fix).toContain("the owner of globex accepts the App's requested permissions at http");
    } finally {
      github.removeInstallation(partial.id);
    }
  });

  it("says once that app.yml asks for a permission the App was never given (or GitHub does not know)", async () => {
    const reports = await doctor(healthyEnv(), {
      manifest: () => Promise.resolve({ ...manifest, permissions: { ...manifest.permissions, crystal_balls: "read" } }),
    });
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["github-installations"]);
    const installations = report(reports, "github-installations");
    expect(installations.detail).toBe("the App's registration lacks what app.yml asks for: crystal_balls: read");
    expect(installations.fix).toContain("if GitHub offers no such permission or event, take it out of app.yml");
  });

  it("fails the Daytona check alone when the API key is wrong", async () => {
    const env = healthyEnv({ DAYTONA_API_KEY: fakeToken("dtn_", 32) });
    const reports = await doctor(env);
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["daytona"]);
    expect(report(reports, "daytona")).toMatchObject({
      detail: `${daytona.apiUrl} refused the API key (401)`,
      fix: expect.stringContaining("DAYTONA_API_KEY") as unknown,
    });
    expectNoSecrets(renderText(reports), env);
  });

  it("fails the local sandbox check alone when bubblewrap is missing", async () => {
    const missing = join(root, "no-such-dir", "bwrap");
    const reports = await doctor(healthyEnv({ HARNESS_BWRAP: missing }));
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["local-sandbox"]);
    expect(report(reports, "local-sandbox")).toMatchObject({
      detail: `bwrap not found at ${missing}`,
      fix: expect.stringContaining("apt-get install bubblewrap") as unknown,
    });
  });

  it("fails the queue store check alone when Redis does not answer", async () => {
    const port = await closedPort();
    const reports = await doctor(healthyEnv({ REDIS_URL: `redis://127.0.0.1:${String(port)}` }));
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["queue-store"]);
    expect(report(reports, "queue-store")).toMatchObject({
      detail: expect.stringContaining(
        `Redis at redis://127.0.0.1:${String(port)} (REDIS_URL) does not answer`,
      ) as unknown,
      fix: expect.stringContaining("start Redis") as unknown,
    });
  });

  it("fails the queue store check when Redis holds keys named as before hash tags, with the one-off fix", async () => {
    const prefix = `doctor-old-layout-${String(process.pid)}`;
    const admin = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
    try {
      await admin.set(`${prefix}:h:seq`, "3");
      const reports = await doctor(healthyEnv({ HARNESS_REDIS_PREFIX: prefix }));
      expect(failures(reports).map((candidate) => candidate.id)).toEqual(["queue-store"]);
      expect(report(reports, "queue-store")).toMatchObject({
        detail: expect.stringContaining("holds keys named as before hash tags") as unknown,
        fix: expect.stringContaining("harness redis rename-keys") as unknown,
      });
    } finally {
      await admin.del(`${prefix}:h:seq`);
      admin.disconnect();
    }
  });

  it("checks a SQLite store's folder without writing a database", async () => {
    const path = join(root, "data", "harness.db");
    const reports = await doctor(healthyEnv({ HARNESS_QUEUE: "sqlite", HARNESS_DB: path, REDIS_URL: undefined }));
    expect(report(reports, "queue-store")).toMatchObject({
      status: "ok",
      detail: `SQLite at ${path} is writable (made at start)`,
    });
  });

  it("fails the default agent's check alone when its CLI is missing, with how to install it", async () => {
    const reports = await doctor(healthyEnv({ PATH: `${join(root, "empty")}:/usr/bin:/bin` }));
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["agent-claude-code"]);
    expect(report(reports, "agent-claude-code")).toMatchObject({
      detail: "claude is not on the PATH sandboxed commands get; it is the default agent",
      fix: "npm install -g @anthropic-ai/claude-code",
    });
    // Agents a repository must choose are said, not failed.
    expect(report(reports, "agent-codex")).toMatchObject({ status: "skip", fix: "npm install -g @openai/codex" });
  });

  it("fails an agent CLI the isolated sandbox could not see", async () => {
    const reports = await doctor(healthyEnv({ HARNESS_SANDBOX_READONLY_PATHS: undefined }));
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["agent-claude-code"]);
    expect(report(reports, "agent-claude-code").fix).toContain("HARNESS_SANDBOX_READONLY_PATHS");
  });

  it("fails once, on the credentials, when the private key is not PEM", async () => {
    // A PEM block whose body is random bytes, made now: shaped like a key, usable as none.
    const { header, body, footer } = fakePemLines(1);
    const malformed = `${[header, ...body, footer].join("\n")}\n`;
    const env = healthyEnv({ PRIVATE_KEY: malformed });
    const reports = await doctor(env);
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["github-app"]);
    expect(report(reports, "github-app")).toMatchObject({
      detail: expect.stringContaining("the private key is not a usable PEM private key") as unknown,
      fix: expect.stringContaining("PRIVATE_KEY") as unknown,
    });
    expect(report(reports, "github-installations").status).toBe("skip");
    expect(report(reports, "webhook-deliveries").status).toBe("skip");
    expect(renderText(reports)).not.toContain(body[0]?.slice(0, 24) ?? "never");
  });

  it("fails once, on the settings, when PRIVATE_KEY is not a key at all", async () => {
    const reports = await doctor(healthyEnv({ PRIVATE_KEY: "definitely-not-a-key" }));
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["settings"]);
    expect(report(reports, "settings").detail).toContain("PRIVATE_KEY is neither a PEM private key nor base64 of one");
  });

  it("fails the credentials check when GitHub refuses the App's JWT", async () => {
    const other = github.addApp({ id: 4343, slug: "someone-else" });
    const reports = await doctor(healthyEnv({ PRIVATE_KEY: other.privateKeyPem }));
    expect(failures(reports).map((candidate) => candidate.id)).toEqual(["github-app"]);
    expect(report(reports, "github-app")).toMatchObject({
      detail: expect.stringContaining("GitHub answered 401") as unknown,
      fix: expect.stringContaining("APP_ID and the private key must belong to the same App") as unknown,
    });
  });

  it("times out on a GitHub that accepts and never answers, as one failure", async () => {
    const stalling = await stallingServer();
    try {
      const started = Date.now();
      const reports = await doctor(healthyEnv({ GHE_HOST: stalling.host }), { timeoutMs: 300 });
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(failures(reports).map((candidate) => candidate.id)).toEqual(["github-app"]);
      expect(report(reports, "github-app")).toMatchObject({
        detail: "no answer within 300 ms",
        fix: `check that this machine reaches http://${stalling.host}/api/v3 (a proxy, a firewall, GHE_HOST)`,
      });
      expect(report(reports, "webhook-deliveries").detail).toBe(
        "not checked: needs GitHub App credentials, which failed",
      );
    } finally {
      await stalling.close();
    }
  });

  it("reports webhook deliveries of the last day that never got through", async () => {
    try {
      // The doctor's clock, injected: "the last day" is measured from it, not from the wall clock.
      const now = Date.parse("2031-03-04T05:06:07Z");
      const hour = 60 * 60 * 1000;
      // Old failures, and a failure redelivered with success, do not count.
      github.addHookDelivery({
        appId: app.id,
        event: "issues",
        action: "opened",
        statusCode: 502,
        deliveredAt: now - 30 * hour,
      });
      const retried = github.addHookDelivery({
        appId: app.id,
        event: "issue_comment",
        action: "created",
        statusCode: 0,
        deliveredAt: now - 3 * hour,
      });
      github.addHookDelivery({
        appId: app.id,
        event: "issue_comment",
        action: "created",
        guid: retried.guid,
        redelivery: true,
        deliveredAt: now - 2 * hour,
      });
      const healthy = await doctor(healthyEnv(), { now: () => now });
      expect(report(healthy, "webhook-deliveries")).toMatchObject({
        status: "ok",
        detail: "1 in the last day, none failed for good",
      });

      github.addHookDelivery({
        appId: app.id,
        event: "issue_comment",
        action: "created",
        statusCode: 503,
        deliveredAt: now - hour,
      });
      const reports = await doctor(healthyEnv(), { now: () => now });
      expect(failures(reports).map((candidate) => candidate.id)).toEqual(["webhook-deliveries"]);
      const deliveries = report(reports, "webhook-deliveries");
      expect(deliveries.detail).toBe(
        "1 of 2 in the last day failed; latest issue_comment.created at 2031-03-04T04:06:07Z: " +
          "Invalid HTTP Response: 503 (503)",
      );
      expect(deliveries.fix).toContain("GitHub could not reach this server");
    } finally {
      github.state.hookDeliveries.length = 0;
    }
  });

  it("fails the model upstream check when the key is refused, never printing the key", async () => {
    const refusing = await refusingModelServer();
    try {
      const env = healthyEnv({ ANTHROPIC_BASE_URL: refusing.url });
      const reports = await doctor(env);
      expect(failures(reports).map((candidate) => candidate.id)).toEqual(["model-upstreams"]);
      expect(report(reports, "model-upstreams")).toMatchObject({
        detail: `anthropic (${refusing.url}) refused the key (401)`,
        fix: expect.stringContaining("ANTHROPIC_API_KEY") as unknown,
      });
      expect(refusing.sawKey()).toBe(true);
      expectNoSecrets(renderText(reports), env);
    } finally {
      await refusing.close();
    }
  });

  it("runs as `harness doctor --json` and exits 1 when a check fails", async () => {
    const output = collect();
    const code = await main(["doctor", "--json"], {
      env: healthyEnv({ DAYTONA_API_KEY: fakeToken("dtn_", 32) }),
      stdout: output.stream,
      stderr: collect().stream,
    });
    expect(code).toBe(1);
    const parsed = JSON.parse(output.text()) as { ok: boolean; checks: CheckReport[] };
    expect(parsed.ok).toBe(false);
    expect(parsed.checks.filter((candidate) => candidate.status === "fail").map((candidate) => candidate.id)).toEqual([
      "daytona",
    ]);
  });
});

/** app.yml's permissions in the fake's terms: each level one GitHub knows. */
function permissions(levels: Readonly<Record<string, string>>): Permissions {
  const known: Permissions = {};
  for (const [name, level] of Object.entries(levels))
    if (level === "read" || level === "write" || level === "admin") known[name] = level;
  return known;
}

function collect(): { stream: Writable; text(): string } {
  let text = "";
  return {
    stream: new Writable({
      write(chunk: Buffer, _encoding, callback) {
        text += chunk.toString();
        callback();
      },
    }),
    text: () => text,
  };
}

/** A port nothing listens on: taken, then given back. */
async function closedPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await closeServer(server);
  return port;
}

/** A server that accepts connections and never says a word. */
async function stallingServer(): Promise<{ host: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: NetServer = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    host: `127.0.0.1:${String(port)}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await closeServer(server);
    },
  };
}

/** A model API that refuses every key with 401, remembering whether the doctor sent ours. */
async function refusingModelServer(): Promise<{ url: string; sawKey(): boolean; close(): Promise<void> }> {
  let saw = false;
  const server: Server = createHttpServer((request, response) => {
    if (request.headers["x-api-key"] === ANTHROPIC_KEY) saw = true;
    response.writeHead(401, { "content-type": "application/json" });
    response.end(
      JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    sawKey: () => saw,
    close: () => closeServer(server),
  };
}

function closeServer(server: NetServer | Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
  });
}
