/**
 * One process of the webhook-ack benchmark (see bench/webhook-ack.ts): the fake GitHub, the
 * Harness server, or the bare Probot app, each in its own process so they do not share an
 * event loop with each other or with the load generator. Talks to its parent over IPC:
 * `setup` → `{ready}`; `mark` → `{marked}` (the CPU clock starts); `sample` → `{cpu}` (work in
 * progress finished first); `stop` → `{cpu}` (the servers drain first) and exit; for the fake,
 * `{report: since}` → `{reactions, statusComments, routes}` and exit. Besides Harness and the bare
 * app, two references for `--floor`: the `minimal` app (the acknowledgement's GitHub calls through
 * Probot's Octokit) and the `writes` app (its two writes alone, on the cheapest client there is).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { createNodeMiddleware, Probot, ProbotOctokit } from "probot";
import { createRawFetch } from "../../src/github/node-fetch.js";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { startHarnessServer } from "../../src/server.js";
import { startFakeGitHub } from "../../test/fakes/github/server.js";
import type { PayloadRepo } from "../../test/fakes/github/webhooks.js";

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
  /** For the `writes` app: 2 (the status comment and the 👀) or 1 (the status comment only). */
  writes?: 1 | 2;
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
          ? REFERENCE_AGENTS.find((reference) => agent.startsWith(reference))
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
    // The fake tells this app's requests from Harness's by the user agent. Octokit's throttle
    // is off: by default it spaces writes a second apart across the whole process, and 50
    // acknowledgements a second would queue without end.
    ...(setup.role === "minimal"
      ? {
          // A function, not an object: Probot's own throttle options arrive after an object's
          // and would replace it whole.
          Octokit: ProbotOctokit.defaults((options: Record<string, unknown>) => ({
            ...options,
            userAgent: REFERENCE_AGENTS[0],
            throttle: { ...(options["throttle"] as object | undefined), enabled: false },
          })),
        }
      : {}),
  });
  const pending = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>): void => {
    pending.add(work);
    void work.finally(() => pending.delete(work));
  };
  const appFn =
    setup.role === "minimal"
      ? minimalAcknowledgement(track)
      : setup.role === "writes"
        ? writesAlone(setup.apiUrl ?? "", setup.writes ?? 2, track)
        : () => undefined;
  drain = () => Promise.all([...pending]).then(() => undefined);
  const middleware = await createNodeMiddleware(appFn, { probot });
  const server = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  send({ ready: true, url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}` });
  process.on("message", (message) => {
    if (message !== "stop") return;
    void drain().then(() => {
      send({ cpu: spent() });
      server.close(() => process.exit(0));
    });
  });
}

/** The user agents of the `minimal` and `writes` apps, which the fake reports apart. */
const REFERENCE_AGENTS = ["bench-minimal", "bench-writes"] as const;

/**
 * The least a Probot app can do to acknowledge a command the way Harness does, with Probot's own
 * Octokit: the same GitHub calls (the repository's and the organisation's config files, and the
 * sender's permission, each kept 30 s as Harness keeps them; then the status comment and the
 * 👀 at once) and nothing else: no validation, audit, journal, queue or rendering. What it costs
 * over the bare app is the GitHub calls' own cost, the floor for any acknowledgement made of them.
 */
function minimalAcknowledgement(track: (work: Promise<unknown>) => void) {
  const cache = new Map<string, { at: number; value: Promise<unknown> }>();
  const cached = (key: string, load: () => Promise<unknown>): Promise<unknown> => {
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < 30_000) return hit.value;
    const value = load().catch(() => undefined);
    cache.set(key, { at: Date.now(), value });
    return value;
  };
  return (app: Probot): void => {
    app.on("issue_comment.created", (context) => {
      const { comment, repository, sender } = context.payload;
      if (!comment.body.startsWith("/harness")) return;
      const owner = repository.owner.login;
      const path = ".github/harness.yml";
      const work = (async () => {
        await Promise.all([
          cached(`config:${String(repository.id)}`, () =>
            Promise.all([
              context.octokit.rest.repos.getContent({ owner, repo: ".github", path }).catch(() => undefined),
              context.octokit.rest.repos.getContent({ owner, repo: repository.name, path }).catch(() => undefined),
            ]),
          ),
          cached(`permission:${String(repository.id)}:${sender.login}`, () =>
            context.octokit.rest.repos.getCollaboratorPermissionLevel({
              owner,
              repo: repository.name,
              username: sender.login,
            }),
          ),
        ]);
        await Promise.all([
          context.octokit.rest.issues.createComment(context.issue({ body: "Queued." })),
          context.octokit.rest.reactions.createForIssueComment(
            context.repo({ comment_id: comment.id, content: "eyes" as const }),
          ),
        ]);
      })();
      track(work);
      // Answered at once, as Harness answers before its acknowledgement is done.
    });
  };
}

/**
 * The acknowledgement's writes and nothing else: on `/harness`, the status comment and the 👀 at
 * once (or, with `count` 1, the status comment only), each one `node:http` keep-alive request
 * (`createRawFetch`, the cheapest client Harness has) with the installation's token, kept from
 * its first use; the comment's answer is parsed, as any client must to edit it later. No reads,
 * no checks, no Octokit. What it costs over the bare app is what the writes alone cost: the floor
 * for an acknowledgement that sends them, whatever else it does. It listens on `app.webhooks`,
 * not `app.on`, and fetches its own tokens: `app.on` would build Probot's Octokit per event, the
 * very cost this reference leaves out.
 */
function writesAlone(apiUrl: string, count: 1 | 2, track: (work: Promise<unknown>) => void) {
  const fetchRaw = createRawFetch();
  const userAgent = REFERENCE_AGENTS[1];
  const tokens = new Map<number, Promise<string>>();
  return (app: Probot): void => {
    const tokenFor = (installationId: number): Promise<string> => {
      const known = tokens.get(installationId);
      if (known) return known;
      const token = (async () => {
        const appOctokit = await app.auth();
        const { token: jwt } = (await appOctokit.auth({ type: "app" })) as { token: string };
        const answer = await fetchRaw(`${apiUrl}/app/installations/${String(installationId)}/access_tokens`, {
          method: "POST",
          headers: { authorization: `Bearer ${jwt}`, accept: "application/vnd.github+json", "user-agent": userAgent },
        });
        return (JSON.parse(String(answer.body)) as { token: string }).token;
      })();
      tokens.set(installationId, token);
      return token;
    };
    app.webhooks.on("issue_comment.created", ({ payload }) => {
      const { comment, issue, repository, installation } = payload;
      if (!comment.body.startsWith("/harness") || !installation) return;
      const work = (async () => {
        const headers = {
          authorization: `token ${await tokenFor(installation.id)}`,
          accept: "application/vnd.github+json",
          "content-type": "application/json",
          "user-agent": userAgent,
        };
        const repo = `${apiUrl}/repos/${repository.full_name}`;
        const [status] = await Promise.all([
          fetchRaw(`${repo}/issues/${String(issue.number)}/comments`, {
            method: "POST",
            headers,
            body: JSON.stringify({ body: "Queued." }),
          }),
          count === 2
            ? fetchRaw(`${repo}/issues/comments/${String(comment.id)}/reactions`, {
                method: "POST",
                headers,
                body: JSON.stringify({ content: "eyes" }),
              })
            : undefined,
        ]);
        JSON.parse(String(status.body));
      })();
      track(work);
    });
  };
}
