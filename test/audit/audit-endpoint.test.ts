import { createServer, get as httpGet, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { auditEndpoint, type AuditEndpointOptions } from "../../src/audit/audit-endpoint.js";
import type { AuditLog, AuditRecord } from "../../src/audit/audit-log.js";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";

const AUDIT_TOKEN = "audit-token-0123456789abcdefghijklmnop";
const auth = { authorization: `Bearer ${AUDIT_TOKEN}` };

type Store = Pick<AuditLog, "after">;

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) =>
      server.close(() => {
        resolve();
      }),
    );
  }
});

/**
 * Serves the endpoint on 127.0.0.1; other paths get 418, so "not mine" is visible.
 * `onRequest` sees each response first.
 */
async function serve(
  store: Store,
  options: Partial<AuditEndpointOptions> = {},
  onRequest?: (res: ServerResponse) => void,
): Promise<string> {
  const endpoint = auditEndpoint(store, { token: AUDIT_TOKEN, ...options });
  const server = createServer((req, res) => {
    onRequest?.(res);
    void endpoint(req, res).then((answered) => {
      if (!answered) res.writeHead(418).end("not the audit endpoint\n");
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
}

function parseLines(body: string): AuditRecord[] {
  expect(body === "" || body.endsWith("\n")).toBe(true);
  return body
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as AuditRecord);
}

/** Records with seqs after `afterSeq`, up to `total`, made up on demand: nothing is held in memory. */
function synthetic(total: number, padding: string, afterSeq: number, limit: number): AuditRecord[] {
  const records: AuditRecord[] = [];
  for (let seq = afterSeq + 1; seq <= Math.min(total, afterSeq + limit); seq++) {
    records.push({
      seq,
      at: "2026-11-22T10:00:00.000Z",
      action: "token.minted",
      repo: "acme/widgets",
      runId: `run-${String(seq % 7)}`,
      details: { padding },
    });
  }
  return records;
}

const trail = new MemoryAuditLog({ now: () => new Date("2026-11-22T10:00:00.000Z") });
beforeAll(async () => {
  await trail.record({
    action: "run.requested",
    repo: "acme/widgets",
    runId: "r1",
    actor: "octocat",
    issue: 12,
    details: { intent: "fix the typo" },
  });
  await trail.record({
    action: "request.approved",
    repo: "acme/widgets",
    runId: "r1",
    actor: "maintainer",
    requestId: "q1",
    details: { requester: "octocat" },
  });
  await trail.record({
    action: "token.minted",
    repo: "acme/widgets",
    runId: "r1",
    details: { permissions: ["contents:write"], repositories: ["acme/widgets"] },
  });
  await trail.record({
    action: "branch.pushed",
    repo: "acme/widgets",
    runId: "r1",
    details: { branch: "harness/issue-12", commit: "0123456789ab" },
  });
  await trail.record({
    action: "pull_request.opened",
    repo: "acme/widgets",
    runId: "r1",
    details: { url: "https://github.com/acme/widgets/pull/3", number: 3 },
  });
});

describe("audit export: access", () => {
  test("with no token configured it is off: 404, saying how to turn it on", async () => {
    for (const token of [undefined, ""]) {
      const base = await serve(trail, { token });
      const res = await fetch(`${base}/audit.jsonl?after=0`, { headers: auth });
      expect(res.status).toBe(404);
      const body = await res.text();
      expect(body).toContain("HARNESS_AUDIT_TOKEN");
      expect(body.trim().split("\n")).toHaveLength(1);
      expect(body).not.toContain("octocat");
    }
  });

  test("without the token, or with a wrong one, the answer is 401 with a Bearer challenge and no entries", async () => {
    const base = await serve(trail);
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: "Bearer wrong" },
      { authorization: `Bearer ${AUDIT_TOKEN}x` },
      { authorization: `Bearer ${AUDIT_TOKEN.slice(0, -1)}X` },
      { authorization: `Basic ${Buffer.from(`u:${AUDIT_TOKEN}`).toString("base64")}` },
      { authorization: AUDIT_TOKEN },
    ];
    for (const headers of attempts) {
      const res = await fetch(`${base}/audit.jsonl?after=0`, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      const body = await res.text();
      expect(body).not.toContain("octocat");
      expect(body.trim().split("\n")).toHaveLength(1);
    }
  });

  test("only GET and HEAD; other paths are left to the rest of the server", async () => {
    const base = await serve(trail);
    const post = await fetch(`${base}/audit.jsonl`, { method: "POST", headers: auth });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect((await fetch(`${base}/audit.jsonlx`, { headers: auth })).status).toBe(418);
    expect((await fetch(`${base}/metrics`, { headers: auth })).status).toBe(418);
  });
});

describe("audit export: what it answers", () => {
  test("JSON lines, oldest first, paged with the next-seq header until a page comes back empty", async () => {
    const base = await serve(trail);
    const first = await fetch(`${base}/audit.jsonl?after=0&limit=2`, { headers: auth });
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("application/x-ndjson");
    expect(first.headers.get("x-harness-audit-next")).toBe("2");
    const page1 = parseLines(await first.text());
    expect(page1).toEqual([
      {
        seq: 1,
        at: "2026-11-22T10:00:00.000Z",
        action: "run.requested",
        repo: "acme/widgets",
        issue: 12,
        runId: "r1",
        actor: "octocat",
        details: { intent: "fix the typo" },
      },
      {
        seq: 2,
        at: "2026-11-22T10:00:00.000Z",
        action: "request.approved",
        repo: "acme/widgets",
        runId: "r1",
        requestId: "q1",
        actor: "maintainer",
        details: { requester: "octocat" },
      },
    ]);
    const second = await fetch(`${base}/audit.jsonl?after=2`, { headers: auth });
    expect(second.headers.get("x-harness-audit-next")).toBe("5");
    expect(parseLines(await second.text()).map((record) => record.action)).toEqual([
      "token.minted",
      "branch.pushed",
      "pull_request.opened",
    ]);
    const caughtUp = await fetch(`${base}/audit.jsonl?after=5`, { headers: auth });
    expect(caughtUp.status).toBe(200);
    expect(caughtUp.headers.get("x-harness-audit-next")).toBe("5");
    expect(await caughtUp.text()).toBe("");
    // No query at all: from the start, up to the default limit.
    expect(parseLines(await (await fetch(`${base}/audit.jsonl`, { headers: auth })).text())).toHaveLength(5);
  });

  test("HEAD gives the next cursor without the lines", async () => {
    const base = await serve(trail);
    const res = await fetch(`${base}/audit.jsonl?after=1&limit=3`, { method: "HEAD", headers: auth });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-harness-audit-next")).toBe("4");
    expect(await res.text()).toBe("");
  });

  test("a bad query is a 400 with a one-line reason", async () => {
    const base = await serve(trail);
    for (const query of [
      "after=abc",
      "after=-1",
      "after=1.5",
      "after=",
      "limit=0",
      "limit=10001",
      "limit=ten",
      "limit=-5",
      "after=99999999999999999999",
    ]) {
      const res = await fetch(`${base}/audit.jsonl?${query}`, { headers: auth });
      expect(res.status, query).toBe(400);
      const body = await res.text();
      expect(body.endsWith("\n")).toBe(true);
      expect(body.trim().split("\n"), query).toHaveLength(1);
      expect(body).toMatch(/^(after|limit) must be/);
    }
    expect((await fetch(`${base}/audit.jsonl?limit=10000`, { headers: auth })).status).toBe(200);
  });

  test("20,000 entries come out whole and in order, two pages of 10,000", async () => {
    const big = new MemoryAuditLog();
    for (let i = 0; i < 20_000; i++)
      await big.record({
        action: "token.minted",
        repo: "acme/widgets",
        runId: `run-${String(i % 13)}`,
        details: { n: i },
      });
    const base = await serve(big);
    const seen: number[] = [];
    let after = 0;
    for (;;) {
      const res = await fetch(`${base}/audit.jsonl?after=${String(after)}&limit=10000`, { headers: auth });
      const records = parseLines(await res.text());
      const next = Number(res.headers.get("x-harness-audit-next"));
      if (records.length === 0) {
        expect(next).toBe(after);
        break;
      }
      expect(records.length).toBeLessThanOrEqual(10_000);
      expect(next).toBe(records.at(-1)?.seq);
      seen.push(...records.map((record) => record.details?.["n"] as number));
      after = next;
    }
    expect(seen).toEqual(Array.from({ length: 20_000 }, (_, i) => i));
  });

  test("a large export is written a page at a time: the store is never read while the client is behind", async () => {
    const total = 10_000;
    const padding = "p".repeat(3_000);
    let response: ServerResponse | undefined;
    let largestRead = 0;
    let readsWhileClientBehind = 0;
    const store: Store = {
      after: (afterSeq, limit) => {
        largestRead = Math.max(largestRead, limit);
        if (response?.writableNeedDrain) readsWhileClientBehind += 1;
        return Promise.resolve(synthetic(total, padding, afterSeq, limit));
      },
    };
    let clientBehind!: () => void;
    const behind = new Promise<void>((resolve) => {
      clientBehind = resolve;
    });
    const base = await serve(store, { pageSize: 200 }, (res) => {
      response = res;
      const write = res.write.bind(res) as (chunk: string) => boolean;
      res.write = ((chunk: string) => {
        const accepted = write(chunk);
        if (!accepted) clientBehind();
        return accepted;
      }) as typeof res.write;
    });

    // A client that reads nothing until the server has had to wait for it, then reads it all.
    const { next, seqs } = await new Promise<{ next: string | undefined; seqs: number[] }>((resolve, reject) => {
      const request = httpGet(`${base}/audit.jsonl?after=0&limit=10000`, { headers: auth }, (res: IncomingMessage) => {
        res.pause();
        const seqs: number[] = [];
        let carry = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          const lines = (carry + chunk).split("\n");
          carry = lines.pop() ?? "";
          for (const line of lines) seqs.push((JSON.parse(line) as AuditRecord).seq);
        });
        res.on("end", () => {
          if (carry !== "") reject(new Error("the body did not end with a whole line"));
          resolve({ next: res.headers["x-harness-audit-next"] as string | undefined, seqs });
        });
        res.on("error", reject);
        void behind.then(() => res.resume());
      });
      request.on("error", reject);
    });

    expect(next).toBe(String(total));
    expect(seqs).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(readsWhileClientBehind).toBe(0);
    expect(largestRead).toBeLessThanOrEqual(200);
  });

  test(
    "a store that fails before the answer starts is a 503 with " +
      "one line; after it started, the body is cut off, not ended",
    async () => {
      const failing = await serve({
        after: () =>
          Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:6379\n    at TCPConnectWrap.afterConnect")),
      });
      const refused = await fetch(`${failing}/audit.jsonl`, { headers: auth });
      expect(refused.status).toBe(503);
      const body = await refused.text();
      expect(body.trim().split("\n")).toHaveLength(1);
      expect(body).not.toContain("ECONNREFUSED");
      expect(body).not.toMatch(/\bat \w/);

      let response: ServerResponse | undefined;
      const store: Store = {
        // Fails on the next turn of the event loop, as a real store would, once the answer has begun.
        after: (afterSeq, limit) =>
          response?.headersSent
            ? new Promise((_resolve, reject) =>
                setImmediate(() => {
                  reject(new Error("the store went away"));
                }),
              )
            : Promise.resolve(synthetic(100, "x", afterSeq, limit)),
      };
      const base = await serve(store, { pageSize: 10 }, (res) => {
        response = res;
      });
      // An exporter that saw a clean end would move its cursor to 100 and never ask for 11–100 again.
      await expect(
        fetch(`${base}/audit.jsonl?after=0&limit=100`, { headers: auth }).then((res) => res.text()),
      ).rejects.toThrow();
    },
  );
});
