/**
 * One process of the webhook-ack benchmark (see bench/webhook-ack.ts): the fake GitHub, the
 * Harness server, or the bare Probot app, each in its own process so they do not share an
 * event loop with each other or with the load generator. Talks to its parent over IPC.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { createNodeMiddleware, Probot, ProbotOctokit } from "probot";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { startHarnessServer } from "../../src/server.js";
import { startFakeGitHub } from "../../test/fakes/github/server.js";

interface Setup {
  role: "github" | "harness" | "bare";
  comments?: number;
  secret?: string;
  appId?: number;
  privateKey?: string;
  apiUrl?: string;
}

const send = (message: unknown): void => {
  process.send?.(message);
};
const quiet = pino({ level: "silent" });
// Throttling off: one installation at 200 commands/s is far past GitHub's content limits, which
// Probot's throttle would (rightly) pace; the benchmark measures the app's own overhead.
const octokitDefaults = (options: object) => ({ ...options, retry: { enabled: false }, throttle: { enabled: false } });

process.on("exit", () => {
  if (process.env["BENCH_CPU"]) {
    const cpu = process.cpuUsage();
    process.stderr.write(
      `cpu ${process.argv[2] ?? ""}: user ${(cpu.user / 1e6).toFixed(2)} s, ` +
        `system ${(cpu.system / 1e6).toFixed(2)} s\n`,
    );
  }
});

process.once("message", (raw) => {
  void start(raw as Setup).catch((error: unknown) => {
    send({ error: String(error) });
    process.exit(1);
  });
});

async function start(setup: Setup): Promise<void> {
  if (setup.role === "github") {
    const github = await startFakeGitHub({ rateLimit: 100_000_000 });
    const app = github.addApp({ id: 9100, slug: "harness" });
    github.addInstallation({
      id: 77,
      appId: app.id,
      account: "acme",
      permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
    });
    await github.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# bench\n" } });
    github.setCollaborator("acme", "widgets", "maintainer", "write");
    const repo = github.repo("acme", "widgets");
    const issue = github.createIssue("acme", "widgets", { title: "Bench", user: "reporter" });
    // Every comment exists first, as on GitHub, so each 👀 reaction has a target.
    const comments = Array.from({ length: setup.comments ?? 0 }, (_, i) =>
      github.addComment("acme", "widgets", issue.number, { body: `/harness bench ${String(i)}`, user: "maintainer" }),
    );
    send({
      ready: true,
      apiUrl: github.apiUrl,
      appId: app.id,
      privateKey: app.privateKeyPem,
      repo,
      issue: { number: issue.number, title: issue.title },
      commentIds: comments.map((comment) => comment.id),
    });
    process.on("message", (message) => {
      if (message !== "report") return;
      const reactions = github.requests
        .filter((request) => request.method === "POST" && /\/issues\/comments\/\d+\/reactions$/.test(request.path))
        .map((request) => ({ commentId: Number(/comments\/(\d+)\//.exec(request.path)?.[1]), time: request.time }));
      send({ reactions });
      void github.close().then(() => process.exit(0));
    });
    return;
  }

  const secret = setup.secret ?? "";
  if (setup.role === "harness") {
    const settings: AppSettings = {
      mode: "app",
      port: 0,
      host: "127.0.0.1",
      appId: setup.appId ?? 0,
      privateKey: setup.privateKey ?? "",
      webhookSecret: secret,
      webhookPath: "/api/github/webhooks",
      apiBaseUrl: setup.apiUrl ?? "",
      logLevel: "silent",
      logFormat: "json",
      sandbox: "local",
      allowedSandboxes: ["local"],
      daytona: {},
      concurrency: 4,
      statusIntervalMs: 5_000,
      warnings: [],
    };
    const server = await startHarnessServer(settings, {
      log: quiet,
      octokitDefaults,
      environment: {},
      queue: () => new InProcessRunQueue(() => Promise.resolve(), { concurrency: 64 }),
    });
    send({ ready: true, url: server.url });
    process.on("message", (message) => {
      if (message === "stop") void server.close(1_000).then(() => process.exit(0));
    });
    return;
  }

  const probot = new Probot({
    appId: setup.appId ?? 0,
    privateKey: setup.privateKey ?? "",
    secret,
    baseUrl: setup.apiUrl ?? "",
    log: quiet,
    Octokit: ProbotOctokit.defaults(octokitDefaults),
  });
  const middleware = await createNodeMiddleware(() => undefined, { probot });
  const server = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  send({ ready: true, url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}` });
  process.on("message", (message) => {
    if (message === "stop") server.close(() => process.exit(0));
  });
}
