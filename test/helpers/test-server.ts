import { Writable } from "node:stream";
import pino from "pino";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { startHarnessServer, type HarnessServer, type ServerOverrides } from "../../src/server.js";
import type { FakeGitHub } from "../fakes/github/server.js";

export interface TestServer {
  server: HarnessServer;
  /** Everything the server logged so far (pino's JSON lines). */
  readonly logs: () => string;
}

/**
 * The real server on a random port for end-to-end tests: the App's settings against the fake
 * GitHub, the local sandbox isolated with `readOnlyPaths` readable (where a test keeps its agent
 * script), status edits unthrottled, and Octokit's own retry and throttle off.
 */
export async function startTestServer(
  github: FakeGitHub,
  options: {
    appId: number;
    privateKey: string;
    webhookSecret: string;
    readOnlyPaths: string[];
    settings?: Partial<Extract<AppSettings, { mode: "app" }>>;
    environment?: NodeJS.ProcessEnv;
    /** Over the defaults above (e.g. `octokitDefaults` that keep the shipped throttle). */
    overrides?: ServerOverrides;
  },
): Promise<TestServer> {
  let logs = "";
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      logs += chunk.toString();
      done();
    },
  });
  const server = await startHarnessServer(
    {
      mode: "app",
      port: 0,
      host: "127.0.0.1",
      appId: options.appId,
      privateKey: options.privateKey,
      webhookSecret: options.webhookSecret,
      webhookPath: "/api/github/webhooks",
      apiBaseUrl: github.apiUrl,
      logLevel: "info",
      logFormat: "json",
      sandbox: "local",
      allowedSandboxes: ["local"],
      daytona: {},
      concurrency: 2,
      statusIntervalMs: 0,
      reviewSettleMs: 0,
      warnings: [],
      localSandbox: { mode: "namespaces", readOnlyPaths: options.readOnlyPaths },
      ...options.settings,
    },
    {
      environment: options.environment ?? { PATH: process.env["PATH"], HOME: process.env["HOME"] },
      log: pino({ level: "info" }, sink),
      octokitDefaults: (defaults: object) => ({ ...defaults, retry: { enabled: false }, throttle: { enabled: false } }),
      ...options.overrides,
    },
  );
  return { server, logs: () => logs };
}
