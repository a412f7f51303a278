import { resolve } from "node:path";
import { describe, expect, test } from "vitest";
import { settingsFromEnv } from "../../src/runtime/app-settings.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";
import { SettingsError } from "../../src/util/errors.js";

const pem = fakePem();

describe("settings from the environment", () => {
  test("no app credentials at all: setup mode (the registration flow)", () => {
    // Registration writes credentials: it listens on loopback unless HOST says otherwise.
    expect(settingsFromEnv({})).toMatchObject({
      mode: "setup",
      port: 3000,
      host: "127.0.0.1",
      githubHost: "github.com",
    });
    expect(settingsFromEnv({ HOST: "0.0.0.0", HARNESS_PUBLIC_URL: "https://harness.example.com" })).toMatchObject({
      mode: "setup",
      host: "0.0.0.0",
      publicUrl: "https://harness.example.com",
    });
    expect(settingsFromEnv({ GHE_HOST: "ghe.corp", GH_ORG: "platform", PORT: "8080" })).toMatchObject({
      mode: "setup",
      port: 8080,
      githubHost: "ghe.corp",
      org: "platform",
    });
    expect(settingsFromEnv({ GHE_HOST: "ghe.corp", GHE_PROTOCOL: "http" })).toMatchObject({ githubProtocol: "http" });
    expect(settingsFromEnv({ GHE_PROTOCOL: "http" })).toMatchObject({ githubProtocol: "https" });
  });

  test("credentials without a webhook secret: refuses to start", () => {
    expect(() => settingsFromEnv({ APP_ID: "1", PRIVATE_KEY: pem })).toThrow(SettingsError);
    expect(() => settingsFromEnv({ APP_ID: "1", PRIVATE_KEY: pem })).toThrow(
      /WEBHOOK_SECRET is not set: refusing to start/,
    );
  });

  test.each([
    [{ APP_ID: "1" }, /APP_ID is set but no private key/],
    [{ PRIVATE_KEY: pem }, /PRIVATE_KEY is set but APP_ID is not/],
    [{ APP_ID: "x", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" }, /APP_ID must be a whole number/],
    [{ APP_ID: "1", PRIVATE_KEY: "not a key", WEBHOOK_SECRET: "s" }, /neither a PEM private key nor base64/],
    [
      { APP_ID: "1", PRIVATE_KEY_PATH: "/nope.pem", WEBHOOK_SECRET: "s" },
      /PRIVATE_KEY_PATH points to \/nope\.pem, which cannot be read/,
    ],
    [
      { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_SANDBOX: "podman" },
      /HARNESS_SANDBOX must be "local", "daytona" or "docker", got "podman"/,
    ],
    [
      { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_SANDBOX: "docker" },
      /HARNESS_DOCKER_IMAGE is not set: runs on Docker need the image/,
    ],
    [
      { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_SANDBOXES: "local,docker" },
      /HARNESS_DOCKER_IMAGE is not set/,
    ],
    [
      { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", DAYTONA_SECRETS: "nonsense" },
      /DAYTONA_SECRETS must look like/,
    ],
  ])("%j is refused with a clear reason", (env, message) => {
    expect(() =>
      settingsFromEnv(env, () => {
        throw new Error("ENOENT");
      }),
    ).toThrow(message);
  });

  test("runs on Docker take the operator's image and engine", () => {
    const settings = settingsFromEnv({
      APP_ID: "1",
      PRIVATE_KEY: pem,
      WEBHOOK_SECRET: "s",
      HARNESS_SANDBOX: "docker",
      HARNESS_DOCKER_IMAGE: " acme/runner:2026.11 ",
      DOCKER_HOST: "unix:///run/user/1000/docker.sock",
    });
    expect(settings).toMatchObject({
      sandbox: "docker",
      allowedSandboxes: ["docker"],
      docker: { image: "acme/runner:2026.11", host: "unix:///run/user/1000/docker.sock" },
    });
  });

  test("HARNESS_DOCKER_IMAGES: the images repositories may choose, the operator's own always among them", () => {
    const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_SANDBOX: "docker" };
    const listed = settingsFromEnv({
      ...base,
      HARNESS_DOCKER_IMAGE: "acme/runner:2026.11",
      HARNESS_DOCKER_IMAGES: " ghcr.io/acme/*, node:22 ,",
    });
    expect(listed).toMatchObject({ dockerImages: ["acme/runner:2026.11", "ghcr.io/acme/*", "node:22"] });
    // Unset: no list, so any image a repository names.
    expect(settingsFromEnv({ ...base, HARNESS_DOCKER_IMAGE: "acme/runner:1" })).not.toHaveProperty("dockerImages");
    expect(() =>
      settingsFromEnv({
        ...base,
        HARNESS_DOCKER_IMAGE: "acme/runner:1",
        HARNESS_DOCKER_IMAGES: "ghcr.io/acme/*,Bad Image",
      }),
    ).toThrow(/^HARNESS_DOCKER_IMAGES: "Bad Image" is not a Docker image reference .*comma-separated\)$/);
  });

  test("app mode: Probot's variables and ours", () => {
    const settings = settingsFromEnv({
      APP_ID: "42",
      PRIVATE_KEY: pem.replace(/\n/g, "\\n"),
      WEBHOOK_SECRET: "s",
      GHE_HOST: "ghe.corp",
      GHE_PROTOCOL: "https",
      HARNESS_SANDBOX: "daytona",
      HARNESS_SANDBOXES: "local",
      DAYTONA_API_KEY: "k",
      DAYTONA_SECRETS: "ANTHROPIC_API_KEY=anthropic",
      HARNESS_CONCURRENCY: "4",
      LOG_FORMAT: "pretty",
    });
    expect(settings).toMatchObject({
      mode: "app",
      appId: 42,
      privateKey: pem,
      apiBaseUrl: "https://ghe.corp/api/v3",
      sandbox: "daytona",
      allowedSandboxes: ["daytona", "local"],
      concurrency: 4,
      logFormat: "pretty",
      daytona: { apiKey: "k", secrets: { ANTHROPIC_API_KEY: "anthropic" } },
      warnings: [],
    });
  });

  test(
    "a base64 private key is accepted; the default sandbox is daytona when a key is set, " +
      "else local with a warning",
    () => {
      const base64 = Buffer.from(pem).toString("base64");
      expect(
        settingsFromEnv({ APP_ID: "1", PRIVATE_KEY: base64, WEBHOOK_SECRET: "s", DAYTONA_API_KEY: "k" }),
      ).toMatchObject({ privateKey: pem, sandbox: "daytona", apiBaseUrl: "https://api.github.com" });
      const local = settingsFromEnv({ APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" });
      expect(local).toMatchObject({ sandbox: "local" });
      expect(local.mode === "app" ? local.warnings[0] : "").toMatch(/runs use the local sandbox on this host/);
      expect(local).toMatchObject({ localSandbox: { mode: "namespaces" } });
    },
  );

  test("HARNESS_UNISOLATED_LOCAL=1 turns isolation off with a loud warning; read-only paths must be absolute", () => {
    const unisolated = settingsFromEnv({
      APP_ID: "1",
      PRIVATE_KEY: pem,
      WEBHOOK_SECRET: "s",
      HARNESS_SANDBOX: "local",
      HARNESS_UNISOLATED_LOCAL: "1",
      HARNESS_SANDBOX_READONLY_PATHS: "/opt/agents, /usr/local/share/tools",
    });
    expect(unisolated).toMatchObject({
      localSandbox: { mode: "none", readOnlyPaths: ["/opt/agents", "/usr/local/share/tools"] },
    });
    expect(unisolated.mode === "app" ? unisolated.warnings.join("\n") : "").toMatch(/WITHOUT isolation/);
    // Daytona only: the opt-out concerns no sandbox in use, so nothing is said.
    const daytona = settingsFromEnv({
      APP_ID: "1",
      PRIVATE_KEY: pem,
      WEBHOOK_SECRET: "s",
      HARNESS_SANDBOX: "daytona",
      DAYTONA_API_KEY: "k",
      HARNESS_UNISOLATED_LOCAL: "1",
    });
    expect(daytona.mode === "app" ? daytona.warnings : []).toEqual([]);
    expect(() =>
      settingsFromEnv({ APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_SANDBOX_READONLY_PATHS: "agents" }),
    ).toThrow(/absolute paths/);
    expect(() =>
      settingsFromEnv({ APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_UNISOLATED_LOCAL: "yes" }),
    ).toThrow(/must be 1 or 0/);
  });
});

describe("queue settings", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  test("SQLite at ./data/harness.db by default; HARNESS_DB moves it; memory on request", () => {
    expect(settingsFromEnv(base)).toMatchObject({ queue: { kind: "sqlite", path: "./data/harness.db" } });
    expect(settingsFromEnv({ ...base, HARNESS_DB: "/var/lib/harness/runs.db" })).toMatchObject({
      queue: { kind: "sqlite", path: "/var/lib/harness/runs.db" },
    });
    expect(settingsFromEnv({ ...base, HARNESS_QUEUE: "memory" })).toMatchObject({ queue: { kind: "memory" } });
    expect(() => settingsFromEnv({ ...base, HARNESS_QUEUE: "kafka" })).toThrow(
      /HARNESS_QUEUE must be "sqlite", "bullmq" or "memory"/,
    );
  });

  test("BullMQ needs a redis:// REDIS_URL; the prefix, cluster cap and lease are settings", () => {
    expect(settingsFromEnv({ ...base, HARNESS_QUEUE: "bullmq", REDIS_URL: "redis://10.0.0.5:6379" })).toMatchObject({
      queue: {
        kind: "bullmq",
        redis: { mode: "node", url: "redis://10.0.0.5:6379", waitReplicas: 0 },
        prefix: "harness",
      },
      maxInFlight: 0,
      leaseMs: 60_000,
    });
    expect(
      settingsFromEnv({
        ...base,
        HARNESS_QUEUE: "bullmq",
        REDIS_URL: "rediss://r:6380",
        HARNESS_REDIS_PREFIX: "harness-prod",
        HARNESS_MAX_IN_FLIGHT: "8",
        HARNESS_LEASE_MS: "15000",
      }),
    ).toMatchObject({ queue: { prefix: "harness-prod" }, maxInFlight: 8, leaseMs: 15_000 });
    expect(() => settingsFromEnv({ ...base, HARNESS_QUEUE: "bullmq" })).toThrow(/HARNESS_QUEUE=bullmq needs REDIS_URL/);
    expect(() => settingsFromEnv({ ...base, HARNESS_QUEUE: "bullmq", REDIS_URL: "http://user:pw@r" })).toThrow(
      /REDIS_URL must start with redis:\/\/ or rediss:\/\/, got "http:\/\/\*\*\*@r"/,
    );
    expect(() =>
      settingsFromEnv({ ...base, HARNESS_QUEUE: "bullmq", REDIS_URL: "redis://r", HARNESS_REDIS_PREFIX: "a:b" }),
    ).toThrow(/HARNESS_REDIS_PREFIX/);
    expect(() => settingsFromEnv({ ...base, HARNESS_LEASE_MS: "0" })).toThrow(
      /HARNESS_LEASE_MS must be greater than 0/,
    );
    expect(
      settingsFromEnv({ ...base, HARNESS_ROLE: "worker", HARNESS_QUEUE: "bullmq", REDIS_URL: "redis://r" }),
    ).toMatchObject({ role: "worker" });
  });
});

describe("GitHub rate-limit settings", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  test("a reserve for acknowledgements and the longest wait, with defaults; nonsense refuses to start", () => {
    expect(settingsFromEnv(base)).toMatchObject({ githubRateLimits: { reserve: 100, maxWaitMs: 15 * 60_000 } });
    expect(
      settingsFromEnv({
        ...base,
        HARNESS_GITHUB_RATE_LIMIT_RESERVE: "0",
        HARNESS_GITHUB_RATE_LIMIT_MAX_WAIT_MINUTES: "5",
      }),
    ).toMatchObject({ githubRateLimits: { reserve: 0, maxWaitMs: 5 * 60_000 } });
    expect(() => settingsFromEnv({ ...base, HARNESS_GITHUB_RATE_LIMIT_RESERVE: "-1" })).toThrow(
      /HARNESS_GITHUB_RATE_LIMIT_RESERVE must be a whole number/,
    );
    expect(() => settingsFromEnv({ ...base, HARNESS_GITHUB_RATE_LIMIT_MAX_WAIT_MINUTES: "0" })).toThrow(
      /HARNESS_GITHUB_RATE_LIMIT_MAX_WAIT_MINUTES must be greater than 0/,
    );
  });
});

describe("Redis Cluster and Sentinel settings", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s", HARNESS_QUEUE: "bullmq" };
  const queueOf = (env: Record<string, string>) => {
    const settings = settingsFromEnv({ ...base, ...env });
    return settings.mode === "app" ? settings.queue : undefined;
  };

  test("REDIS_CLUSTER_NODES: a cluster by any of its nodes, with credentials and TLS of their own", () => {
    expect(queueOf({ REDIS_CLUSTER_NODES: "10.0.0.1:6379, redis-2.internal:6380,[fd00::3]:6379" })).toEqual({
      kind: "bullmq",
      prefix: "harness",
      redis: {
        mode: "cluster",
        nodes: [
          { host: "10.0.0.1", port: 6379 },
          { host: "redis-2.internal", port: 6380 },
          { host: "fd00::3", port: 6379 },
        ],
        waitReplicas: 0,
      },
    });
    const password = fakeToken("redis");
    expect(
      queueOf({ REDIS_CLUSTER_NODES: "r:6379", REDIS_USERNAME: "harness", REDIS_PASSWORD: password, REDIS_TLS: "1" }),
    ).toMatchObject({ redis: { mode: "cluster", username: "harness", password, tls: true } });
  });

  test("REDIS_SENTINELS with REDIS_SENTINEL_NAME: each write waits for a replica unless told otherwise", () => {
    expect(queueOf({ REDIS_SENTINELS: "s1:26379,s2:26379,s3:26379", REDIS_SENTINEL_NAME: "mymaster" })).toMatchObject({
      redis: {
        mode: "sentinel",
        name: "mymaster",
        sentinels: [
          { host: "s1", port: 26379 },
          { host: "s2", port: 26379 },
          { host: "s3", port: 26379 },
        ],
        waitReplicas: 1,
      },
    });
    const sentinelPassword = fakeToken("sentinel");
    expect(
      queueOf({
        REDIS_SENTINELS: "s1:26379",
        REDIS_SENTINEL_NAME: "mymaster",
        REDIS_SENTINEL_PASSWORD: sentinelPassword,
        REDIS_WAIT_REPLICAS: "0",
      }),
    ).toMatchObject({ redis: { sentinelPassword, waitReplicas: 0 } });
    expect(queueOf({ REDIS_URL: "redis://r:6379", REDIS_WAIT_REPLICAS: "2" })).toMatchObject({
      redis: { mode: "node", waitReplicas: 2 },
    });
  });

  test.each([
    [{}, /HARNESS_QUEUE=bullmq needs REDIS_URL .*, REDIS_CLUSTER_NODES .* or REDIS_SENTINELS/],
    [
      { REDIS_URL: "redis://r", REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "m" },
      /Set one of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS, not REDIS_URL and REDIS_SENTINELS/,
    ],
    [{ REDIS_CLUSTER_NODES: "10.0.0.1" }, /REDIS_CLUSTER_NODES must be host:port pairs .*; "10\.0\.0\.1" is not one/],
    [{ REDIS_CLUSTER_NODES: "10.0.0.1:0" }, /"10\.0\.0\.1:0" is not one/],
    [{ REDIS_CLUSTER_NODES: "10.0.0.1:65536" }, /"10\.0\.0\.1:65536" is not one/],
    [{ REDIS_CLUSTER_NODES: "redis://10.0.0.1:6379" }, /"redis:\/\/10\.0\.0\.1:6379" is not one/],
    [{ REDIS_CLUSTER_NODES: "::1:6379" }, /"::1:6379" is not one/],
    [{ REDIS_CLUSTER_NODES: "," }, /REDIS_CLUSTER_NODES must list host:port pairs/],
    [
      { REDIS_CLUSTER_NODES: Array.from({ length: 65 }, (_, i) => `h${String(i)}:1`).join(",") },
      /lists 65 hosts; at most 64/,
    ],
    [{ REDIS_CLUSTER_NODES: `${"a".repeat(5000)}:1` }, /REDIS_CLUSTER_NODES is 5002 characters long; at most 4096/],
    [{ REDIS_CLUSTER_NODES: `${"a".repeat(300)}:1` }, /is not one/],
    [{ REDIS_SENTINELS: "s:26379" }, /REDIS_SENTINELS needs REDIS_SENTINEL_NAME/],
    [{ REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "my master" }, /REDIS_SENTINEL_NAME may hold/],
    [{ REDIS_CLUSTER_NODES: "r:6379", REDIS_SENTINEL_NAME: "m" }, /REDIS_SENTINEL_NAME goes with REDIS_SENTINELS/],
    [{ REDIS_CLUSTER_NODES: "r:6379", REDIS_TLS: "yes" }, /REDIS_TLS must be 1 or 0/],
    [
      { REDIS_CLUSTER_NODES: "r:6379", REDIS_WAIT_REPLICAS: "-1" },
      /REDIS_WAIT_REPLICAS must be a whole number from 0 to 16/,
    ],
    [{ REDIS_CLUSTER_NODES: "r:6379", REDIS_WAIT_REPLICAS: "17" }, /REDIS_WAIT_REPLICAS must be a whole number/],
    [{ REDIS_CLUSTER_NODES: "r:6379", REDIS_PASSWORD: "a\nb" }, /REDIS_PASSWORD holds a control character/],
    [{ REDIS_CLUSTER_NODES: "r:6379", REDIS_PASSWORD: "p".repeat(1025) }, /REDIS_PASSWORD is longer than 1024/],
    [
      { REDIS_URL: "redis://r:6379", REDIS_PASSWORD: "p" },
      /REDIS_PASSWORD goes with REDIS_CLUSTER_NODES or REDIS_SENTINELS; with REDIS_URL, put the credentials in the URL/,
    ],
    [{ REDIS_URL: `redis://${"r".repeat(3000)}` }, /REDIS_URL is 3008 characters long; at most 2048/],
  ])("refused with the fix: %o", (env, message) => {
    expect(() => settingsFromEnv({ ...base, ...(env as Record<string, string>) })).toThrow(message);
  });

  test("a refused password is never echoed", () => {
    const password = fakeToken("redis");
    expect(() => settingsFromEnv({ ...base, REDIS_CLUSTER_NODES: "r:6379", REDIS_PASSWORD: `${password}\n` })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining(password) as unknown }) as Error,
    );
  });
});

describe("repository cache settings (HARNESS_REPO_CACHE)", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  test("beside the SQLite store by default, in ./data with Redis, off in memory or on request; bounded in GB", () => {
    expect(settingsFromEnv({ ...base, HARNESS_DB: "/var/lib/harness/runs.db" })).toMatchObject({
      repoCache: { root: "/var/lib/harness/repo-cache", maxBytes: 20 * 1024 ** 3 },
    });
    expect(
      settingsFromEnv({ ...base, HARNESS_QUEUE: "bullmq", REDIS_URL: "redis://r", HARNESS_REPO_CACHE_MAX_GB: "1.5" }),
    ).toMatchObject({ repoCache: { root: resolve("./data/repo-cache"), maxBytes: 1.5 * 1024 ** 3 } });
    expect(settingsFromEnv({ ...base, HARNESS_REPO_CACHE: "/srv/mirrors" })).toMatchObject({
      repoCache: { root: "/srv/mirrors" },
    });
    expect(settingsFromEnv({ ...base, HARNESS_REPO_CACHE: "off" })).not.toHaveProperty("repoCache");
    expect(settingsFromEnv({ ...base, HARNESS_QUEUE: "memory" })).not.toHaveProperty("repoCache");
    expect(() => settingsFromEnv({ ...base, HARNESS_REPO_CACHE_MAX_GB: "lots" })).toThrow(
      /HARNESS_REPO_CACHE_MAX_GB must be a positive number, got "lots"/,
    );
  });
});

describe("process roles", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  test("all by default; web runs nothing; worker and web need a shared queue", () => {
    expect(settingsFromEnv(base)).toMatchObject({ role: "all", concurrency: 2 });
    expect(settingsFromEnv({ ...base, HARNESS_ROLE: "web", HARNESS_CONCURRENCY: "4" })).toMatchObject({
      role: "web",
      concurrency: 0,
    });
    expect(settingsFromEnv({ ...base, HARNESS_ROLE: "worker" })).toMatchObject({ role: "worker", concurrency: 2 });
    expect(() => settingsFromEnv({ ...base, HARNESS_ROLE: "worker", HARNESS_QUEUE: "memory" })).toThrow(
      /needs a queue shared between processes/,
    );
    expect(() => settingsFromEnv({ ...base, HARNESS_ROLE: "both" })).toThrow(/HARNESS_ROLE must be/);
  });
});

describe("run page settings", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  const secret = "x".repeat(32);
  test("off without OAuth credentials; on with client, secret, session secret and public URL", () => {
    expect(settingsFromEnv(base)).not.toHaveProperty("web");
    expect(
      settingsFromEnv({
        ...base,
        GITHUB_CLIENT_ID: "Iv1.abc",
        GITHUB_CLIENT_SECRET: "shh",
        HARNESS_SESSION_SECRET: secret,
        HARNESS_PUBLIC_URL: "https://harness.example.com/",
      }),
    ).toMatchObject({
      web: {
        clientId: "Iv1.abc",
        clientSecret: "shh",
        sessionSecret: secret,
        publicUrl: "https://harness.example.com",
        githubWebUrl: "https://github.com",
      },
    });
  });

  test("the client alone (as the manifest flow writes it) starts with the pages off and says why", () => {
    const settings = settingsFromEnv({ ...base, GITHUB_CLIENT_ID: "Iv1.abc", GITHUB_CLIENT_SECRET: "shh" });
    expect(settings).not.toHaveProperty("web");
    expect(settings.mode === "app" ? settings.warnings.join("\n") : "").toMatch(
      /run pages are off: HARNESS_PUBLIC_URL is not set/,
    );
    expect(() =>
      settingsFromEnv({
        ...base,
        GITHUB_CLIENT_ID: "Iv1.abc",
        GITHUB_CLIENT_SECRET: "shh",
        HARNESS_PUBLIC_URL: "https://h.example.com",
      }),
    ).toThrow(/HARNESS_SESSION_SECRET is not set/);
  });
});

describe("setup secrets (HARNESS_SETUP_SECRETS)", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  test("owner/repo:NAME and owner/*:NAME entries; each value must be set", () => {
    const settings = settingsFromEnv({
      ...base,
      HARNESS_SETUP_SECRETS: "Acme/Widgets:NPM_TOKEN, acme/*:PIP_TOKEN",
      NPM_TOKEN: "x".repeat(20),
      PIP_TOKEN: "y".repeat(20),
    });
    expect(settings).toMatchObject({
      setupSecrets: [
        { repo: "acme/widgets", name: "NPM_TOKEN" },
        { repo: "acme/*", name: "PIP_TOKEN" },
      ],
    });
    expect(() => settingsFromEnv({ ...base, HARNESS_SETUP_SECRETS: "acme/widgets:NPM_TOKEN" })).toThrow(
      /NPM_TOKEN is not set/,
    );
    expect(() => settingsFromEnv({ ...base, HARNESS_SETUP_SECRETS: "NPM_TOKEN", NPM_TOKEN: "x" })).toThrow(
      /owner\/repo:NAME/,
    );
    expect(() => settingsFromEnv({ ...base, HARNESS_SETUP_SECRETS: "*/*:NPM_TOKEN", NPM_TOKEN: "x" })).toThrow(
      /owner\/repo:NAME/,
    );
  });
});

describe("network policy (HARNESS_NETWORK)", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };
  test("the ceiling and the always-allowed entries; a wrong mode stops start-up", () => {
    expect(settingsFromEnv(base)).toMatchObject({ network: { ceiling: "open", allow: [] } });
    expect(
      settingsFromEnv({
        ...base,
        HARNESS_NETWORK: "allowlist",
        HARNESS_NETWORK_ALLOW: "npm.internal.example, 10.0.0.0/8",
      }),
    ).toMatchObject({ network: { ceiling: "allowlist", allow: ["npm.internal.example", "10.0.0.0/8"] } });
    expect(() => settingsFromEnv({ ...base, HARNESS_NETWORK: "closed" })).toThrow(
      /HARNESS_NETWORK must be open, allowlist or none/,
    );
  });
});

test("a malformed HARNESS_NETWORK_ALLOW entry stops start-up naming it", () => {
  expect(() =>
    settingsFromEnv({
      APP_ID: "1",
      PRIVATE_KEY: pem,
      WEBHOOK_SECRET: "s",
      HARNESS_NETWORK_ALLOW: "https://npm.example/path",
    }),
  ).toThrow(/HARNESS_NETWORK_ALLOW: .*npm\.example/);
});

describe("agent environment (HARNESS_AGENT_ENV) and provider settings", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };

  test("names, comma-separated, deduplicated; none by default", () => {
    expect(settingsFromEnv(base)).toMatchObject({ agentEnv: [] });
    expect(
      settingsFromEnv({ ...base, HARNESS_AGENT_ENV: " HTTPS_PROXY, NO_PROXY,,NODE_EXTRA_CA_CERTS,NO_PROXY" }),
    ).toMatchObject({ agentEnv: ["HTTPS_PROXY", "NO_PROXY", "NODE_EXTRA_CA_CERTS"] });
  });

  test.each([
    ["GITHUB_TOKEN", /HARNESS_AGENT_ENV lists GITHUB_TOKEN, which is never passed to an agent/],
    ["GH_ENTERPRISE_TOKEN", /lists GH_ENTERPRISE_TOKEN, which is never passed/],
    ["GIT_ASKPASS", /lists GIT_ASKPASS, which is never passed/],
    ["PRIVATE_KEY", /lists PRIVATE_KEY, which is never passed/],
    ["WEBHOOK_SECRET", /lists WEBHOOK_SECRET, which is never passed/],
    ["DAYTONA_API_KEY", /lists DAYTONA_API_KEY, which is never passed/],
    ["HARNESS_AUDIT_TOKEN", /lists HARNESS_AUDIT_TOKEN, which is never passed/],
    ["HTTPS-PROXY", /takes variable names separated by commas, got "HTTPS-PROXY"/],
  ])("refuses %s at start", (name, expected) => {
    expect(() => settingsFromEnv({ ...base, HARNESS_AGENT_ENV: `NO_PROXY,${name}` })).toThrow(SettingsError);
    expect(() => settingsFromEnv({ ...base, HARNESS_AGENT_ENV: `NO_PROXY,${name}` })).toThrow(expected);
  });

  test("good provider settings start; unusable ones stop start-up naming the variable", () => {
    expect(() =>
      settingsFromEnv({
        ...base,
        ANTHROPIC_BASE_URL: "https://llm-gateway.example.com/anthropic",
        OPENAI_BASE_URL: "http://10.0.0.5:4000/v1",
        CLAUDE_CODE_USE_BEDROCK: "1",
        CLAUDE_CODE_MAX_RETRIES: "3",
      }),
    ).not.toThrow();
    expect(() => settingsFromEnv({ ...base, ANTHROPIC_BASE_URL: "llm-gateway.example.com" })).toThrow(
      /Agent provider settings: ANTHROPIC_BASE_URL must be an http\(s\) URL, got "llm-gateway.example.com"/,
    );
    expect(() => settingsFromEnv({ ...base, OPENAI_BASE_URL: "https://me:pw@gw.example.com/v1" })).toThrow(
      /OPENAI_BASE_URL must not carry credentials in the URL/,
    );
    expect(() => settingsFromEnv({ ...base, CLAUDE_CODE_USE_VERTEX: "yes please" })).toThrow(
      /CLAUDE_CODE_USE_VERTEX must be 1 or 0/,
    );
    expect(() => settingsFromEnv({ ...base, CLAUDE_CODE_USE_BEDROCK: "1", CLAUDE_CODE_USE_VERTEX: "1" })).toThrow(
      /both set: choose one provider for Claude Code/,
    );
  });

  test("a GitHub token in a variable an agent would get stops start-up, without printing it", () => {
    const token = fakeToken("ghp_");
    for (const env of [
      { ANTHROPIC_AUTH_TOKEN: token },
      { HARNESS_AGENT_ENV: "HTTPS_PROXY", HTTPS_PROXY: `http://x:${token}@proxy.example.com:3128` },
    ]) {
      let message = "";
      try {
        settingsFromEnv({ ...base, ...env });
      } catch (error) {
        message = error instanceof Error ? error.message : String(error);
      }
      expect(message).toMatch(/holds what looks like a GitHub token, which never reaches an agent/);
      expect(message).not.toContain(token);
    }
  });
});

describe("HARNESS_MCP_TOKEN (POST /mcp, the sandbox tools)", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: pem, WEBHOOK_SECRET: "s" };

  test("unset, the endpoint is off; a long token turns it on", () => {
    expect(settingsFromEnv(base)).not.toHaveProperty("mcpToken");
    const token = fakeToken("", 40);
    expect(settingsFromEnv({ ...base, HARNESS_MCP_TOKEN: token })).toMatchObject({ mcpToken: token });
  });

  test.each([
    ["a".repeat(31), /HARNESS_MCP_TOKEN is too short \(31 characters\): use at least 32/],
    [`${"a".repeat(20)} ${"b".repeat(20)}`, /HARNESS_MCP_TOKEN must not contain spaces or line breaks/],
  ])("a token that would not keep the endpoint shut stops start-up", (token, expected) => {
    expect(() => settingsFromEnv({ ...base, HARNESS_MCP_TOKEN: token })).toThrow(SettingsError);
    expect(() => settingsFromEnv({ ...base, HARNESS_MCP_TOKEN: token })).toThrow(expected);
  });
});
