/**
 * One process of the webhook-ack benchmark (see bench/webhook-ack.ts): the fake GitHub, the
 * Harness server, or one of the apps it is held against (the bare Probot app, the minimal Probot
 * app and the writes alone, see webhook-ack-references.ts), each in its own process so they do
 * not share an event loop with each other or with the load generator. Talks to its parent over
 * IPC: `setup` → `{ready}`; `mark` → `{marked}` (the CPU clock starts); `sample` → `{cpu}` (work in
 * progress finished first); `stop` → `{cpu}` (the servers drain first) and exit; for the fake,
 * `{report: since}` → `{reactions, statusComments, routes}` and exit.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { createNodeMiddleware, Probot, ProbotOctokit } from "probot";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { startHarnessServer } from "../../src/server.js";
import { startFakeGitHub } from "../../test/fakes/github/server.js";
import type { PayloadRepo } from "../../test/fakes/github/webhooks.js";
import { minimalProbotApp, REFERENCE_AGENTS, startWritesAlone, type Track } from "./webhook-ack-references.js";

interface Setup {
  role: "github" | "harness" | "bare" | "minimal" | "writes";
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

// A round's end: its CPU so far, once the work it started has finished (the clock keeps running).
process.on("message", (message) => {
  if (message !== "sample") return;
  void drain().then(() => {
    send({ cpu: spent() });
  });
});

process.on("message", (message) => {
  if (message !== "mark") return;
  void drain().then(() => {
    baseline = { cpu: process.cpuUsage(), at: performance.now() };
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
      if (typeof message !== "object" || message === null || !("report" in message)) return;
      const windowStart = Number(message.report);
      // The reference apps' requests are their own: reported apart, and not taken for Harness's.
      const referenceOf = (request: { headers: Record<string, string | string[] | undefined> }) => {
        const agent = request.headers["user-agent"];
        return typeof agent === "string"
          ? (Object.keys(REFERENCE_AGENTS) as Array<keyof typeof REFERENCE_AGENTS>).find((name) =>
              agent.startsWith(REFERENCE_AGENTS[name]),
            )
          : undefined;
      };
      const harnessRequests = github.requests.filter((request) => referenceOf(request) === undefined);
      const posts = harnessRequests.filter((request) => request.method === "POST");
      const reactions = posts
        .filter((request) => /\/issues\/comments\/\d+\/reactions$/.test(request.path))
        .map((request) => ({ commentId: Number(/comments\/(\d+)\//.exec(request.path)?.[1]), time: request.time }));
      const statusComments = posts
        .filter((request) => /\/repos\/[^/]+\/widgets\/issues\/\d+\/comments$/.test(request.path))
        .map((request) => ({ owner: request.path.split("/")[4] ?? "", time: request.time }));
      // Every request each app made in the window, by route, to see what a webhook costs in calls.
      const routes: Record<string, Record<string, number>> = {};
      for (const request of github.requests) {
        if (request.time < windowStart) continue;
        const path = request.path.replace(/\/repos\/[^/]+\/[^/]+/, "/repos/:r").replace(/\/\d+/g, "/:n");
        const route = `${request.method} ${path}`;
        const into = (routes[referenceOf(request) ?? "harness"] ??= {});
        into[route] = (into[route] ?? 0) + 1;
      }
      send({ reactions, statusComments, routes });
      void github.close().then(() => process.exit(0));
    });
    return;
  }

  if (setup.role === "harness") {
    const settings: AppSettings = {
      mode: "app",
      port: 0,
      host: "127.0.0.1",
      appId: setup.appId ?? 0,
      privateKey: setup.privateKey ?? "",
      webhookSecret: setup.secret ?? "",
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

  // Work a handler started and did not await: a CPU sample waits for it, and a failure is shown,
  // not taken for a cheap acknowledgement.
  const pending = new Set<Promise<unknown>>();
  const track: Track = (work) => {
    const settled = work.then(
      () => undefined,
      (error: unknown) => {
        console.error(`${setup.role}: an acknowledgement failed: ${String(error)}`);
      },
    );
    pending.add(settled);
    void settled.then(() => pending.delete(settled));
  };
  drain = () => Promise.all([...pending]).then(() => undefined);
  const listening =
    setup.role === "writes" ? await startWritesAlone(appSettings(setup), track) : await probotApp(setup, track);
  send({ ready: true, url: listening.url });
  process.on("message", (message) => {
    if (message !== "stop") return;
    void drain().then(async () => {
      send({ cpu: spent() });
      await listening.close();
      process.exit(0);
    });
  });
}

function appSettings(setup: Setup) {
  return {
    secret: setup.secret ?? "",
    appId: setup.appId ?? 0,
    privateKey: setup.privateKey ?? "",
    apiUrl: setup.apiUrl ?? "",
  };
}

/** The bare app (no handlers) or the minimal one, each on Probot's own middleware. */
async function probotApp(setup: Setup, track: Track): Promise<{ url: string; close: () => Promise<void> }> {
  const probot = new Probot({
    appId: setup.appId ?? 0,
    privateKey: setup.privateKey ?? "",
    secret: setup.secret ?? "",
    baseUrl: setup.apiUrl ?? "",
    log: quiet,
    // The fake tells this app's requests from Harness's by the user agent. Octokit's throttle
    // is off: by default it spaces writes a second apart across the whole process, and 50
    // acknowledgements a second would queue without end. Its retries stay on, as shipped.
    ...(setup.role === "minimal"
      ? {
          // A function, not an object: Probot's own throttle options arrive after an object's
          // and would replace it whole.
          Octokit: ProbotOctokit.defaults((options: Record<string, unknown>) => ({
            ...options,
            userAgent: REFERENCE_AGENTS.minimal,
            throttle: { ...(options["throttle"] as object | undefined), enabled: false },
          })),
        }
      : {}),
  });
  const appFn = setup.role === "minimal" ? minimalProbotApp(track) : () => undefined;
  const middleware = await createNodeMiddleware(appFn, { probot });
  const server = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          resolve();
        });
      }),
  };
}
