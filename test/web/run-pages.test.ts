import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AuditLog } from "../../src/audit/audit-log.js";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";
import type { NodeReport } from "../../src/contracts/types.js";
import { MemoryPullRequestLedger } from "../../src/pulls/ledger/memory.js";
import type { PullRequestLedger } from "../../src/pulls/ledger/port.js";
import { pullOutcome } from "../../src/pulls/outcome.js";
import type { RunRequest } from "../../src/runs/request.js";
import type { JournalEntry, JournalEvent } from "../../src/runs/journal/port.js";
import { MemoryRunJournal } from "../../src/runs/journal/memory.js";
import { createRedactor } from "../../src/util/redact.js";
import type { Viewer, WebAuth } from "../../src/web/auth/types.js";
import { createRunPages, type RunPagesOptions } from "../../src/web/run-pages.js";
import { runRequest } from "../runs/journal-conformance.js";
import { openSse } from "./sse-client.js";

/** Sessions by cookie value, and which repositories each viewer can read. */
class StubAuth implements WebAuth {
  readonly readable = new Map<string, Set<string>>([
    ["alice", new Set(["acme/widgets"])],
    ["bob", new Set(["acme/widgets", "secret/vault"])],
  ]);
  readonly sessions = new Map<string, Viewer>([
    ["s-alice", { login: "alice", id: 1 }],
    ["s-bob", { login: "bob", id: 2 }],
  ]);

  handle(): Promise<boolean> {
    return Promise.resolve(false);
  }

  viewer(req: IncomingMessage): Promise<Viewer | undefined> {
    const session = /(?:^|;\s*)session=([^;]+)/.exec(req.headers.cookie ?? "")?.[1];
    return Promise.resolve(session ? this.sessions.get(session) : undefined);
  }

  canRead(viewer: Viewer, repo: { owner: string; name: string }): Promise<boolean> {
    return Promise.resolve(this.readable.get(viewer.login)?.has(`${repo.owner}/${repo.name}`) ?? false);
  }

  loginUrl(returnTo: string): string {
    return `/auth/login?return_to=${encodeURIComponent(returnTo)}`;
  }
}

const TOKEN = `ghp_${"A1b2C3d4".repeat(5)}`;
const at = (second: number): string => new Date(Date.UTC(2026, 10, 22, 10, 0, second)).toISOString();
const fixedNow = new Date(Date.UTC(2026, 10, 22, 10, 1, 0));
let clock = Date.UTC(2026, 10, 22, 9, 0, 0);
/** Counts live follows, so a test can see a closed viewer's stream let go of the journal. */
class CountingJournal extends MemoryRunJournal {
  active = 0;
  private idleWaiters: Array<() => void> = [];

  override follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<JournalEntry> {
    return this.counted(super.follow(runId, afterSeq, signal));
  }

  private async *counted(inner: AsyncIterable<JournalEntry>): AsyncGenerator<JournalEntry> {
    this.active += 1;
    try {
      yield* inner;
    } finally {
      this.active -= 1;
      if (this.active === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  idle(): Promise<void> {
    return this.active === 0
      ? Promise.resolve()
      : new Promise((resolve) => {
          this.idleWaiters.push(resolve);
        });
  }
}

const journal = new CountingJournal({ now: () => new Date((clock += 1000)) });
const audit = new MemoryAuditLog({ now: () => new Date((clock += 1000)) });
const auth = new StubAuth();
let server: Server;
let base = "";

const done = runRequest({ intent: "Fix the <img src=x onerror=alert(1)> typo" });
const secret = runRequest({
  repo: { id: 9, owner: "secret", name: "vault", htmlUrl: "https://github.com/secret/vault", defaultBranch: "main" },
  issue: { number: 5, title: "t", body: "", htmlUrl: "https://github.com/secret/vault/issues/5" },
});
const failed = runRequest({ intent: "add the export flag" });

const nodes = [
  { id: "implement", title: "Implement the change", kind: "agent" as const, onFailureOnly: false },
  { id: "verify", title: "Run the tests", kind: "exec" as const, onFailureOnly: false },
  { id: "fix", title: "Fix the failures", kind: "agent" as const, onFailureOnly: true },
];

function started(runId: string): JournalEvent {
  return {
    type: "run.started",
    runId,
    repo: "acme/widgets",
    branch: `harness/issue-12-${runId}`,
    intent: "x",
    blueprint: "default",
    nodes,
    at: at(0),
  };
}

function nodeReport(nodeId: string, title: string, extra: Partial<NodeReport> = {}): NodeReport {
  return {
    nodeId,
    title,
    kind: "exec",
    attempt: 1,
    status: "succeeded",
    startedAt: at(1),
    finishedAt: at(5),
    durationMs: 4000,
    ...extra,
  };
}

async function fill(runId: string, events: JournalEvent[]): Promise<void> {
  for (const event of events) await journal.append(runId, event);
}

beforeAll(async () => {
  for (const request of [done, secret, failed]) await journal.accepted(request);
  await fill(done.runId, [
    started(done.runId),
    {
      type: "node.started",
      runId: done.runId,
      nodeId: "implement",
      title: "Implement the change",
      kind: "agent",
      attempt: 1,
      at: at(1),
    },
    {
      type: "node.log",
      runId: done.runId,
      nodeId: "implement",
      attempt: 1,
      text: "<script>alert(1)</script>\n\x1b[31mred\x1b[0m and plain\n\x1b]0;window title\x07\x1b[2Jcleared\n",
      at: at(2),
    },
    // An entry that escaped redaction when recorded: the page redacts once more.
    {
      type: "node.log",
      runId: done.runId,
      nodeId: "implement",
      attempt: 1,
      text: `token ${TOKEN} and hunter2-secret-value\n`,
      at: at(3),
    },
    {
      type: "node.finished",
      runId: done.runId,
      report: nodeReport("implement", "Implement the change", {
        kind: "agent",
        summary: "Fixed the typo in README",
        durationMs: 65_000,
      }),
      at: at(5),
    },
    {
      type: "node.started",
      runId: done.runId,
      nodeId: "verify",
      title: "Run the tests",
      kind: "exec",
      attempt: 1,
      at: at(6),
    },
    {
      type: "node.finished",
      runId: done.runId,
      report: nodeReport("verify", "Run the tests", { durationMs: 2500 }),
      at: at(9),
    },
    {
      type: "commit.finished",
      runId: done.runId,
      commitSha: "0123456789abcdef0123456789abcdef01234567",
      changedFiles: 1,
      at: at(10),
    },
    {
      type: "run.finished",
      runId: done.runId,
      report: {
        runId: done.runId,
        repo: "acme/widgets",
        branch: "b",
        intent: "x",
        blueprint: "default",
        status: "succeeded",
        startedAt: at(0),
        finishedAt: at(30),
        durationMs: 30_000,
        nodes: [
          nodeReport("implement", "Implement the change", {
            kind: "agent",
            summary: "Fixed the typo in README",
            turns: 4,
            costUsd: 0.31,
            tokens: { input: 1_500, output: 230, cacheRead: 800, cacheWrite: 0 },
          }),
        ],
        pushResult: { pushed: true, prUrl: "https://github.com/acme/widgets/pull/77" },
      },
      at: at(30),
    },
  ]);
  await fill(secret.runId, [started(secret.runId)]);
  await fill(failed.runId, [
    started(failed.runId),
    {
      type: "run.finished",
      runId: failed.runId,
      report: {
        runId: failed.runId,
        repo: "acme/widgets",
        branch: "b",
        intent: "x",
        blueprint: "default",
        status: "succeeded",
        startedAt: at(0),
        finishedAt: at(40),
        durationMs: 40_000,
        nodes: [],
        pushResult: {
          pushed: false,
          errorKind: "protected_branch",
          error: "GitHub refused the push: the branch is protected",
          remedy: "Let the app push to harness/* branches",
        },
      },
      at: at(40),
    },
  ]);
  await audit.record({
    action: "run.requested",
    repo: "acme/widgets",
    installationId: 7,
    issue: 12,
    runId: done.runId,
    actor: "octocat",
    at: at(0),
    details: { trigger: "comment" },
  });
  await audit.record({
    action: "request.approved",
    repo: "acme/widgets",
    runId: done.runId,
    requestId: "req-42",
    actor: "<img src=x onerror=alert(2)>",
    at: at(1),
    details: { requester: "octocat", note: "approved with hunter2-secret-value <b>bold</b>" },
  });
  await audit.record({
    action: "token.minted",
    repo: "acme/widgets",
    runId: done.runId,
    at: at(2),
    details: { permissions: ["contents:write", "pull_requests:write"], repositories: ["acme/widgets"] },
  });
  await audit.record({
    action: "branch.pushed",
    repo: "acme/widgets",
    runId: done.runId,
    at: at(29),
    details: { branch: "harness/issue-12", commit: "0123456789abcdef" },
  });
  await audit.record({
    action: "pull_request.opened",
    repo: "acme/widgets",
    runId: done.runId,
    at: at(30),
    details: { url: "https://github.com/acme/widgets/pull/77", number: 77 },
  });
  await audit.record({
    action: "run.requested",
    repo: "acme/widgets",
    runId: failed.runId,
    actor: "someone-else",
    at: at(0),
  });
  const pages = createRunPages({
    journal,
    auth,
    audit,
    now: () => fixedNow,
    redactor: createRedactor(["hunter2-secret-value"]),
    heartbeatMs: 60_000,
  });
  server = createServer((req, res) => {
    void pages(req, res).then((answered) => {
      if (!answered) res.writeHead(418).end("not a run page");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
});

const get = (path: string, viewer?: string, init: RequestInit = {}) =>
  fetch(`${base}${path}`, {
    redirect: "manual",
    ...init,
    headers: {
      ...(viewer ? { cookie: `theme=dark; session=s-${viewer}` } : {}),
      ...(init.headers as Record<string, string> | undefined),
    },
  });

describe("run pages: access", () => {
  test("a signed-out viewer is sent to sign in and brought back to the page asked for", async () => {
    for (const path of ["/runs", `/runs/${done.runId}`, "/runs?before=abc"]) {
      const res = await get(path);
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe(`/auth/login?return_to=${encodeURIComponent(path)}`);
    }
    const forged = await get("/runs", "mallory");
    expect(forged.status).toBe(302);
  });

  test("the list shows only runs of repositories the viewer can read", async () => {
    const alice = await (await get("/runs", "alice")).text();
    expect(alice).toContain(`/runs/${done.runId}`);
    expect(alice).toContain(`/runs/${failed.runId}`);
    expect(alice).not.toContain(secret.runId);
    expect(alice).not.toContain("secret/vault");
    const bob = await (await get("/runs", "bob")).text();
    expect(bob).toContain(secret.runId);
    expect(bob).toContain("secret/vault");
  });

  test("a run of a repository the viewer cannot read is answered like one that does not exist", async () => {
    const refused = await get(`/runs/${secret.runId}`, "alice");
    const unknown = await get("/runs/no-such-run", "alice");
    expect(refused.status).toBe(404);
    expect(unknown.status).toBe(404);
    const body = await refused.text();
    expect(body).toBe(await unknown.text());
    expect(body).toContain("Run not found");
    expect(body).not.toContain(secret.runId);
    expect((await get(`/runs/${secret.runId}`, "bob")).status).toBe(200);
  });

  test("the event stream asks for a session and hides runs the viewer cannot read", async () => {
    expect((await get(`/runs/${done.runId}/events`)).status).toBe(401);
    expect((await get(`/runs/${secret.runId}/events`, "alice")).status).toBe(404);
    expect((await get("/runs/nope/events", "alice")).status).toBe(404);
  });

  test("other paths are left to the rest of the server; other methods are refused", async () => {
    expect((await get("/healthz", "alice")).status).toBe(418);
    expect((await get("/runsx", "alice")).status).toBe(418);
    const post = await get("/runs", "alice", { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("run pages: what they show", () => {
  test("the list gives repository, issue, intent, state, duration and PR, newest first", async () => {
    const html = await (await get("/runs", "alice")).text();
    const rows = html.split("<tr data-run=").slice(1);
    expect(rows.map((row) => row.slice(1, row.indexOf('"', 1)))).toEqual([failed.runId, done.runId]);
    const row = rows[1] ?? "";
    expect(row).toContain("acme/widgets");
    expect(row).toContain('href="https://github.com/acme/widgets/issues/12">#12</a>');
    expect(row).toContain("state-succeeded");
    expect(row).toContain("30.0 s");
    expect(row).toContain('href="https://github.com/acme/widgets/pull/77">#77</a>');
    expect(row).toContain("Fix the &lt;img src=x onerror=alert(1)&gt; typo");
    expect(rows[0]).toContain("state-failed");
  });

  test("a run's page shows its steps with states and timings, the outcome, the PR and the output", async () => {
    const res = await get(`/runs/${done.runId}`, "alice");
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toMatch(
      new RegExp(
        '<li class="step" data-step="implement" data-state="succeeded"><span class="step-state">succeeded</span> ' +
          '<span class="step-title">Implement the change</span><span class="step-attempt"></span> ' +
          '<span class="step-duration">1 min 05 s</span>',
      ),
    );
    expect(html).toMatch(/data-step="verify" data-state="succeeded">.*2\.5 s/);
    // The fix step runs only after a failure: it stays pending, never "skipped".
    expect(html).toMatch(/data-step="fix" data-state="pending" data-on-failure-only="true"/);
    expect(html).toContain('<a id="pr-link" href="https://github.com/acme/widgets/pull/77">');
    expect(html).toContain("Fixed the typo in README");
    expect(html).toMatch(/id="agent-usage">4 agent turns · 2\.5k tokens · \$0\.31</);
    expect(html).toContain("<code>0123456789ab</code>");
    expect(html).toContain('<span class="log-step">▶ Implement the change\n</span>');
    expect(html).toContain('data-live="false"');
    // A finished run needs no script.
    expect(html).not.toContain("<script");
  });

  test("a failed run shows its classified error and what to do", async () => {
    const html = await (await get(`/runs/${failed.runId}`, "alice")).text();
    expect(html).toContain("Push failed (protected branch): ");
    expect(html).toContain("GitHub refused the push: the branch is protected");
    expect(html).toContain("What to do: Let the app push to harness/* branches");
    expect(html).toContain("state-failed");
  });

  test("output is escaped, colours become classes, other escapes are dropped, nothing executes", async () => {
    const html = await (await get(`/runs/${done.runId}`, "alice")).text();
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).not.toContain("<script>alert(1)");
    expect(html).toContain('<span class="ansi-red">red</span> and plain');
    expect(html).toContain("cleared");
    expect(html).not.toContain("window title");
    // eslint-disable-next-line no-control-regex -- looking for control characters is the test
    expect(html).not.toMatch(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/);
    expect(html).not.toContain("<img src=x");
  });

  test("secrets are redacted at render, whatever was recorded", async () => {
    const html = await (await get(`/runs/${done.runId}`, "alice")).text();
    expect(html).not.toContain(TOKEN);
    expect(html).not.toContain("hunter2-secret-value");
    expect(html).toContain("token [REDACTED] and [REDACTED]");
  });

  test("pages carry security headers and load script and styles from this origin only", async () => {
    const res = await get(`/runs/${secret.runId}`, "bob");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("same-origin");
    const html = await res.text();
    // A live run loads the script, from this server, and has no inline script.
    expect(html.match(/<script[^>]*>/g)).toEqual(['<script src="/runs/assets/run.js" defer>']);
    expect(html).toContain('data-live="true"');
    const script = await get("/runs/assets/run.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toContain("text/javascript");
    const source = await script.text();
    expect(source).toContain("new EventSource(");
    expect(source).not.toContain("innerHTML");
    expect((await get("/runs/assets/run.css")).headers.get("content-type")).toContain("text/css");
  });
});

describe("run pages: the audit trail", () => {
  test("a run's page lists its audit entries: who asked, who approved, the token, the push and the PR", async () => {
    const html = await (await get(`/runs/${done.runId}`, "alice")).text();
    const section = html.slice(
      html.indexOf('<section class="audit-section" id="audit">'),
      html.indexOf("</section>", html.indexOf('id="audit"')),
    );
    expect(section).toContain("<h2>Audit</h2>");
    const rows = section.split("<tr data-seq=").slice(1);
    expect(rows.map((row) => /<code>([^<]+)<\/code>/.exec(row)?.[1])).toEqual([
      "run.requested",
      "request.approved",
      "token.minted",
      "branch.pushed",
      "pull_request.opened",
    ]);
    expect(rows[0]).toContain('<time datetime="2026-11-22T10:00:00.000Z">2026-11-22 10:00:00 UTC</time>');
    expect(rows[0]).toContain("<td>octocat</td>");
    expect(rows[1]).toContain('<span class="muted">request:</span> req-42');
    expect(rows[1]).toContain('<span class="muted">requester:</span> octocat');
    expect(rows[2]).toContain('<span class="muted">permissions:</span> contents:write, pull_requests:write');
    expect(rows[3]).toContain('<span class="muted">commit:</span> 0123456789abcdef');
    expect(rows[4]).toContain('<span class="muted">url:</span> https://github.com/acme/widgets/pull/77');
    // Another run's entries stay on that run's page.
    expect(section).not.toContain("someone-else");
  });

  test("a hostile actor or detail is shown as text, and secrets are redacted", async () => {
    const html = await (await get(`/runs/${done.runId}`, "alice")).text();
    expect(html).toContain("<td>&lt;img src=x onerror=alert(2)&gt;</td>");
    expect(html).not.toContain("<img src=x onerror=alert(2)>");
    expect(html).toContain("approved with [REDACTED] &lt;b&gt;bold&lt;/b&gt;");
    expect(html).not.toContain("hunter2-secret-value");
  });

  test("a run with no entries says so; a trail that cannot be read costs only the Audit section", async () => {
    expect(await (await get(`/runs/${secret.runId}`, "bob")).text()).toContain("No audit entries for this run yet.");
    const broken: AuditLog = {
      record: () => Promise.resolve(),
      after: () => Promise.resolve([]),
      forRun: () => Promise.reject(new Error("redis is down")),
      close: () => Promise.resolve(),
    };
    const pages = createRunPages({ journal, auth, audit: broken, now: () => fixedNow });
    const other = createServer((req, res) => {
      void pages(req, res);
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${String((other.address() as AddressInfo).port)}/runs/${done.runId}`, {
        headers: { cookie: "session=s-alice" },
      });
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toContain("The audit trail could not be read just now");
      expect(html).toContain('<a id="pr-link" href="https://github.com/acme/widgets/pull/77">');
      expect(html).not.toContain("redis is down");
    } finally {
      other.closeAllConnections();
      await new Promise<void>((resolve) =>
        other.close(() => {
          resolve();
        }),
      );
    }
  });

  test("without an audit trail the page has no Audit section", async () => {
    const pages = createRunPages({ journal, auth, now: () => fixedNow });
    const other = createServer((req, res) => {
      void pages(req, res);
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const html = await (
        await fetch(`http://127.0.0.1:${String((other.address() as AddressInfo).port)}/runs/${done.runId}`, {
          headers: { cookie: "session=s-alice" },
        })
      ).text();
      expect(html).toContain("Fixed the typo in README");
      expect(html).not.toContain('id="audit"');
    } finally {
      other.closeAllConnections();
      await new Promise<void>((resolve) =>
        other.close(() => {
          resolve();
        }),
      );
    }
  });
});

describe("run pages: the live event stream", () => {
  test("replays after Last-Event-ID, then streams new entries live, and closes when the run ends", async () => {
    const live = runRequest();
    await journal.accepted(live);
    await fill(live.runId, [
      started(live.runId),
      {
        type: "node.started",
        runId: live.runId,
        nodeId: "implement",
        title: "Implement the change",
        kind: "agent",
        attempt: 1,
        at: at(1),
      },
      { type: "node.log", runId: live.runId, nodeId: "implement", attempt: 1, text: "first line\n", at: at(2) },
    ]);
    const stream = await openSse(`${base}/runs/${live.runId}/events?after=0`, {
      cookie: "session=s-alice",
      "last-event-id": "1",
    });
    expect(stream.status).toBe(200);
    expect(stream.headers["content-type"]).toContain("text/event-stream");
    const replayed = [await stream.next(), await stream.next()];
    expect(replayed.map((m) => [m?.id, m?.event])).toEqual([
      ["2", "step"],
      ["3", "output"],
    ]);
    expect(JSON.parse(replayed[0]?.data ?? "{}")).toMatchObject({
      id: "implement",
      state: "running",
      heading: "▶ Implement the change\n",
    });
    expect(JSON.parse(replayed[1]?.data ?? "{}")).toEqual({ segments: [["", "first line\n"]] });

    await journal.append(live.runId, {
      type: "node.log",
      runId: live.runId,
      nodeId: "implement",
      attempt: 1,
      text: `\x1b[32mok\x1b[0m <b>bold?</b> ${TOKEN}\n`,
      at: at(3),
    });
    const output = await stream.next();
    expect(output?.id).toBe("4");
    expect(JSON.parse(output?.data ?? "{}")).toEqual({
      segments: [
        ["ansi-green", "ok"],
        ["", " <b>bold?</b> [REDACTED]\n"],
      ],
    });

    await journal.append(live.runId, {
      type: "node.finished",
      runId: live.runId,
      report: nodeReport("implement", "Implement the change", { durationMs: 1500 }),
      at: at(4),
    });
    await journal.append(live.runId, {
      type: "run.ended",
      runId: live.runId,
      state: "cancelled",
      error: "The run was cancelled",
      at: at(5),
    });
    const rest = await stream.rest();
    expect(rest.map((m) => [m.id, m.event])).toEqual([
      ["5", "step"],
      ["6", "end"],
    ]);
    expect(JSON.parse(rest[0]?.data ?? "{}")).toMatchObject({ id: "implement", state: "succeeded", durationMs: 1500 });
    expect(JSON.parse(rest[1]?.data ?? "{}")).toEqual({ state: "cancelled", error: "The run was cancelled" });
  });

  test("?after= picks up where the page left off; a finished run replays and closes", async () => {
    const stream = await openSse(`${base}/runs/${done.runId}/events?after=7`, { cookie: "session=s-alice" });
    const messages = await stream.rest();
    expect(messages.map((m) => [m.id, m.event])).toEqual([["9", "end"]]);
    expect(JSON.parse(messages[0]?.data ?? "{}")).toMatchObject({
      state: "succeeded",
      prUrl: "https://github.com/acme/widgets/pull/77",
      durationMs: 30_000,
    });
    const all = await (await openSse(`${base}/runs/${done.runId}/events`, { cookie: "session=s-alice" })).rest();
    expect(all.map((m) => m.event)).toEqual(["plan", "step", "output", "output", "step", "step", "step", "end"]);
    expect(all.map((m) => m.data).join("")).not.toContain(TOKEN);
  });

  test("a page rendered mid-run hands its cursor to the script, which resumes from there", async () => {
    const live = runRequest();
    await journal.accepted(live);
    await fill(live.runId, [
      started(live.runId),
      {
        type: "node.started",
        runId: live.runId,
        nodeId: "verify",
        title: "Run the tests",
        kind: "exec",
        attempt: 1,
        at: at(1),
      },
    ]);
    const html = await (await get(`/runs/${live.runId}`, "alice")).text();
    const after = /data-after="(\d+)"/.exec(html)?.[1];
    expect(after).toBe("2");
    expect(html).toContain('data-step="verify" data-state="running"');
    const stream = await openSse(`${base}/runs/${live.runId}/events?after=${after ?? ""}`, {
      cookie: "session=s-alice",
    });
    await journal.append(live.runId, {
      type: "node.finished",
      runId: live.runId,
      report: nodeReport("verify", "Run the tests"),
      at: at(2),
    });
    expect((await stream.next())?.id).toBe("3");
    stream.close();
  });

  test("a viewer who goes away lets go of the run: its follow of the journal ends", async () => {
    const live = runRequest();
    await journal.accepted(live);
    await fill(live.runId, [started(live.runId)]);
    await journal.idle();
    const stream = await openSse(`${base}/runs/${live.runId}/events`, { cookie: "session=s-alice" });
    expect((await stream.next())?.event).toBe("plan");
    expect(journal.active).toBe(1);
    stream.close();
    await journal.idle();
    expect(journal.active).toBe(0);
  });
});

describe("run pages: what became of the pull request", () => {
  // A journal and ledger of their own, so these runs do not change what the lists above show.
  const runs = new MemoryRunJournal({ now: () => new Date((clock += 1000)) });
  const pulls = new MemoryPullRequestLedger({ now: () => new Date((clock += 1000)) });
  const opened = "2026-11-22T10:00:00.000Z";
  const merged = runRequest({ intent: "merged change" });
  const closed = runRequest({ intent: "closed change" });
  const open = runRequest({ intent: "open change" });
  const secretMerged = runRequest({ ...secret, runId: `${secret.runId}m`, intent: "vault change" });
  const noPr = runRequest({ intent: "no pull request" });
  let number = 100;

  /** A run that ended with a pull request Harness now follows; answers the PR's number. */
  async function ranAndOpened(request: RunRequest, rounds = 0): Promise<number> {
    number += 1;
    const url = `${request.repo.htmlUrl}/pull/${String(number)}`;
    await runs.accepted(request);
    await runs.append(request.runId, started(request.runId));
    await runs.append(request.runId, {
      type: "run.finished",
      runId: request.runId,
      report: {
        runId: request.runId,
        repo: `${request.repo.owner}/${request.repo.name}`,
        branch: "b",
        intent: request.intent,
        blueprint: "default",
        status: "succeeded",
        startedAt: at(0),
        finishedAt: at(20),
        durationMs: 20_000,
        nodes: [],
        pushResult: { pushed: true, prUrl: url },
      },
      at: at(20),
    });
    await pulls.track({
      repo: { id: request.repo.id, owner: request.repo.owner, name: request.repo.name },
      number,
      installationId: 7,
      url,
      headRef: `harness/issue-${String(request.issue.number)}`,
      issueNumber: request.issue.number,
      openedByRunId: request.runId,
      openedAt: opened,
    });
    await pulls.update(request.repo.id, number, (pull) => ({ ...pull, rounds }));
    return number;
  }

  async function close(request: RunRequest, pr: number, wasMerged: boolean, closedAt: string): Promise<void> {
    await pulls.update(request.repo.id, pr, (pull) =>
      pullOutcome(pull, { merged: wasMerged, closedAt, ...(wasMerged ? { mergedAt: closedAt } : {}) }),
    );
  }

  /** Serves run pages built with `options` (and no ledger unless given) while `work` runs. */
  async function withPages(
    options: Partial<RunPagesOptions>,
    work: (page: (path: string, viewer: string) => Promise<Response>) => Promise<void>,
  ): Promise<void> {
    const pages = createRunPages({ journal: runs, auth, now: () => fixedNow, ...options });
    const other = createServer((req, res) => {
      void pages(req, res);
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${String((other.address() as AddressInfo).port)}`;
    try {
      await work((path, viewer) => fetch(`${origin}${path}`, { headers: { cookie: `session=s-${viewer}` } }));
    } finally {
      other.closeAllConnections();
      await new Promise<void>((resolve) =>
        other.close(() => {
          resolve();
        }),
      );
    }
  }

  const listed = (page: string): string[] =>
    page
      .split("<tr data-run=")
      .slice(1)
      .map((row) => row.slice(1, row.indexOf('"', 1)));

  beforeAll(async () => {
    await close(merged, await ranAndOpened(merged, 1), true, "2026-11-22T12:05:00Z");
    await close(closed, await ranAndOpened(closed, 3), false, "2026-11-23T09:00:00Z");
    await ranAndOpened(open);
    await close(secretMerged, await ranAndOpened(secretMerged), true, "2026-11-25T10:00:00Z");
    await runs.accepted(noPr);
    // Followed but not opened by Harness: no run to list under any outcome.
    await pulls.track({
      repo: { id: 1, owner: "acme", name: "widgets" },
      number: 5,
      installationId: 7,
      url: "https://github.com/acme/widgets/pull/5",
      headRef: "feature",
      issueNumber: 5,
      openedAt: opened,
    });
    await close(merged, 5, true, "2026-11-22T11:00:00Z");
  });

  test("a merged run's page says so, with the time to merge and the follow-up rounds", async () => {
    await withPages({ pulls }, async (page) => {
      const res = await page(`/runs/${merged.runId}`, "alice");
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toMatch(
        /<p class="pr-outcome" id="pr-outcome" data-outcome="merged">Merged 2 h 05 min after it was opened/,
      );
      expect(html).toContain('<time datetime="2026-11-22T12:05:00.000Z">2026-11-22 12:05 UTC</time>');
      expect(html).toContain("· 1 follow-up round</p>");
    });
  });

  test("closed and open pull requests say so; a run without one shows no outcome line", async () => {
    await withPages({ pulls }, async (page) => {
      const closedPage = await (await page(`/runs/${closed.runId}`, "alice")).text();
      expect(closedPage).toContain('data-outcome="closed">Closed without merge');
      expect(closedPage).toContain("· 3 follow-up rounds</p>");
      expect(await (await page(`/runs/${open.runId}`, "alice")).text()).toContain(
        'data-outcome="open">Open · no follow-up rounds</p>',
      );
      expect(await (await page(`/runs/${noPr.runId}`, "alice")).text()).not.toContain('id="pr-outcome"');
    });
  });

  test("?outcome= lists only the runs whose pull request had that outcome", async () => {
    await withPages({ pulls }, async (page) => {
      const mergedList = await page("/runs?outcome=merged", "bob");
      expect(mergedList.status).toBe(200);
      const html = await mergedList.text();
      expect(listed(html)).toEqual([secretMerged.runId, merged.runId]);
      expect(html).toContain("Runs whose pull request was merged");
      expect(listed(await (await page("/runs?outcome=closed", "bob")).text())).toEqual([closed.runId]);
      expect(listed(await (await page("/runs?outcome=open", "bob")).text())).toEqual([open.runId]);
    });
  });

  test("a viewer who cannot read a repository does not see its runs in a filtered list", async () => {
    await withPages({ pulls }, async (page) => {
      const html = await (await page("/runs?outcome=merged", "alice")).text();
      expect(listed(html)).toEqual([merged.runId]);
      expect(html).not.toContain(secretMerged.runId);
      expect(html).not.toContain("secret/vault");
    });
  });

  test("the list offers the filters, marking the one shown", async () => {
    await withPages({ pulls }, async (page) => {
      const all = await (await page("/runs", "alice")).text();
      expect(all).toContain('id="pull-filters"');
      expect(all).toContain('<strong aria-current="page">All</strong>');
      expect(all).toContain('<a href="/runs?outcome=merged">Merged</a>');
      const filtered = await (await page("/runs?outcome=closed", "alice")).text();
      expect(filtered).toContain('<strong aria-current="page">Closed</strong>');
      expect(filtered).toContain('<a href="/runs">All</a>');
    });
  });

  test("a filtered list pages to older runs and keeps its filter", async () => {
    await withPages({ pulls, pageSize: 1 }, async (page) => {
      const first = await (await page("/runs?outcome=merged", "bob")).text();
      expect(listed(first)).toEqual([secretMerged.runId]);
      const older = /<a href="([^"]+)">Older runs/.exec(first)?.[1]?.replace(/&amp;/g, "&");
      expect(older).toMatch(/^\/runs\?outcome=merged&before=\d+$/);
      const second = await (await page(older ?? "", "bob")).text();
      expect(listed(second)).toEqual([merged.runId]);
    });
  });

  test("an unknown outcome is answered 400 with a readable page, the value shown as text", async () => {
    await withPages({ pulls }, async (page) => {
      const res = await page(`/runs?outcome=${encodeURIComponent("<b>won</b>")}`, "alice");
      expect(res.status).toBe(400);
      const html = await res.text();
      expect(html).toContain("Unknown filter");
      expect(html).toContain("&lt;b&gt;won&lt;/b&gt;");
      expect(html).not.toContain("<b>won</b>");
      expect(html).toContain('<a href="/runs?outcome=merged">Merged</a>');
    });
  });

  test("without a ledger there are no filters to offer, and asking for one is answered 400", async () => {
    await withPages({}, async (page) => {
      expect(await (await page("/runs", "alice")).text()).not.toContain('id="pull-filters"');
      const res = await page("/runs?outcome=merged", "alice");
      expect(res.status).toBe(400);
      expect(await res.text()).toContain("does not keep track of pull requests");
      expect(await (await page(`/runs/${merged.runId}`, "alice")).text()).not.toContain('id="pr-outcome"');
    });
  });

  test("a run's pull request is found however many were followed after it", async () => {
    const busy = new MemoryPullRequestLedger();
    const first = {
      repo: { id: open.repo.id, owner: open.repo.owner, name: open.repo.name },
      number: 1,
      installationId: 7,
      url: `${open.repo.htmlUrl}/pull/1`,
      headRef: "harness/busy",
      issueNumber: open.issue.number,
      openedByRunId: open.runId,
      openedAt: opened,
    };
    await busy.track(first);
    for (let later = 2; later <= 1_500; later++)
      await busy.track({ ...first, number: later, openedByRunId: `later-${String(later)}` });
    await withPages({ pulls: busy }, async (page) => {
      const html = await (await page(`/runs/${open.runId}`, "alice")).text();
      expect(html).toContain('id="pr-outcome" data-outcome="open">Open');
    });
  });

  test("a ledger that cannot be read costs the run page its outcome line only", async () => {
    const broken: PullRequestLedger = {
      track: () => Promise.reject(new Error("redis is down")),
      get: () => Promise.reject(new Error("redis is down")),
      openedBy: () => Promise.reject(new Error("redis is down")),
      update: () => Promise.reject(new Error("redis is down")),
      list: () => Promise.reject(new Error("redis is down")),
      close: () => Promise.resolve(),
    };
    await withPages({ pulls: broken }, async (page) => {
      const res = await page(`/runs/${merged.runId}`, "alice");
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toContain("What became of the pull request could not be read just now.");
      expect(html).not.toContain("redis is down");
    });
  });
});
