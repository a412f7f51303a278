/**
 * One process of the webhook-ack benchmark (see bench/webhook-ack.ts): the fake GitHub, the
 * Harness server, or the bare Probot app, each in its own process so they do not share an
 * event loop with each other or with the load generator. Talks to its parent over IPC:
 * `setup` → `{ready}`; `mark` → `{marked}` (the CPU clock starts); `stop` → `{cpu}` (the servers
 * drain first) and exit; for the fake, `report` → `{reactions, statusComments, cpu}` and exit.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { createNodeMiddleware, Probot } from "probot";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { startHarnessServer } from "../../src/server.js";
import { startFakeGitHub } from "../../test/fakes/github/server.js";
import type { PayloadRepo } from "../../test/fakes/github/webhooks.js";

interface Setup {
  role: "github" | "harness" | "bare";
  installations?: number;
  commentsPerRepo?: number;
  secret?: string;
  appId?: number;
  privateKey?: string;
  apiUrl?: string;
  /** Octokit's retries and throttle off in Harness, to see what they cost. */
  unthrottled?: boolean;
}

/** What the fake hands the load generator: per installation, its repository and comments. */
export interface BenchTarget {
  installationId: number;
  owner: string;
  repo: PayloadRepo;
  issue: { number: number; title: string };
  commentIds: number[];
}

export interface CpuSpent {
  /** Microseconds of CPU (user + system) since `mark`. */
  micros: number;
  /** Of which in the kernel (sockets, mostly). */
  systemMicros: number;
  wallMs: number;
}

const send = (message: unknown): void => {
  process.send?.(message);
};
const quiet = pino({ level: "silent" });

let baseline = { cpu: process.cpuUsage(), at: performance.now() };
let markedAt = Date.now();
/** Work still in flight from the warm-up, finished before the CPU clock starts. */
let drain = (): Promise<void> => Promise.resolve();
const spent = (): CpuSpent => {
  const cpu = process.cpuUsage(baseline.cpu);
  return { micros: cpu.user + cpu.system, systemMicros: cpu.system, wallMs: performance.now() - baseline.at };
};

process.once("message", (raw) => {
  void start(raw as Setup).catch((error: unknown) => {
    send({ error: String(error) });
    process.exit(1);
  });
});

process.on("message", (message) => {
  if (message !== "mark") return;
  void drain().then(() => {
    baseline = { cpu: process.cpuUsage(), at: performance.now() };
    markedAt = Date.now();
    send({ marked: true });
  });
});

async function start(setup: Setup): Promise<void> {
  if (setup.role === "github") {
    const github = await startFakeGitHub({ rateLimit: 100_000_000 });
    const app = github.addApp({ id: 9100, slug: "harness" });
    const targets: BenchTarget[] = [];
    for (let i = 0; i < (setup.installations ?? 1); i++) {
      const owner = `org${String(i)}`;
      const installationId = 1000 + i;
      github.addInstallation({
        id: installationId,
        appId: app.id,
        account: owner,
        permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
      });
      await github.addRepo({ owner, name: "widgets", files: { "README.md": "# bench\n" } });
      github.setCollaborator(owner, "widgets", "maintainer", "write");
      const issue = github.createIssue(owner, "widgets", { title: "Bench", user: "reporter" });
      // Every comment exists first, as on GitHub, so each 👀 reaction has a target.
      const comments = Array.from({ length: setup.commentsPerRepo ?? 0 }, (_, k) =>
        github.addComment(owner, "widgets", issue.number, { body: `/harness bench ${String(k)}`, user: "maintainer" }),
      );
      targets.push({
        installationId,
        owner,
        repo: github.repo(owner, "widgets"),
        issue: { number: issue.number, title: issue.title },
        commentIds: comments.map((comment) => comment.id),
      });
    }
    send({
      ready: true,
      apiUrl: github.apiUrl,
      appId: app.id,
      privateKey: app.privateKeyPem,
      targets,
    });
    process.on("message", (message) => {
      if (message !== "report") return;
      const posts = github.requests.filter((request) => request.method === "POST");
      const reactions = posts
        .filter((request) => /\/issues\/comments\/\d+\/reactions$/.test(request.path))
        .map((request) => ({ commentId: Number(/comments\/(\d+)\//.exec(request.path)?.[1]), time: request.time }));
      const statusComments = posts
        .filter((request) => /\/repos\/[^/]+\/widgets\/issues\/\d+\/comments$/.test(request.path))
        .map((request) => ({ owner: request.path.split("/")[4] ?? "", time: request.time }));
      // Every request Harness made in the window, by route, to see what a webhook costs in calls.
      const routes: Record<string, number> = {};
      for (const request of github.requests) {
        if (request.time < markedAt) continue;
        const path = request.path.replace(/\/repos\/[^/]+\/[^/]+/, "/repos/:r").replace(/\/\d+/g, "/:n");
        const route = `${request.method} ${path}`;
        routes[route] = (routes[route] ?? 0) + 1;
      }
      send({ reactions, statusComments, routes, cpu: spent() });
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
    // Octokit as shipped (retries on, writes paced per installation) unless asked otherwise.
    const server = await startHarnessServer(settings, {
      log: quiet,
      ...(setup.unthrottled
        ? {
            octokitDefaults: (options: object) => ({
              ...options,
              retry: { enabled: false },
              throttle: { enabled: false },
            }),
          }
        : {}),
      environment: {},
      queue: () => new InProcessRunQueue(() => Promise.resolve(), { concurrency: 64 }),
    });
    drain = () => server.settle();
    send({ ready: true, url: server.url });
    process.on("message", (message) => {
      if (message !== "stop") return;
      void (async () => {
        await server.settle();
        send({ cpu: spent() });
        await server.close(1_000);
        process.exit(0);
      })();
    });
    return;
  }

  const probot = new Probot({
    appId: setup.appId ?? 0,
    privateKey: setup.privateKey ?? "",
    secret,
    baseUrl: setup.apiUrl ?? "",
    log: quiet,
  });
  const middleware = await createNodeMiddleware(() => undefined, { probot });
  const server = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  send({ ready: true, url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}` });
  process.on("message", (message) => {
    if (message !== "stop") return;
    send({ cpu: spent() });
    server.close(() => process.exit(0));
  });
}
