import { afterEach, describe, expect, test } from "vitest";
import type { AuditEntry, AuditLimits, AuditLog, AuditRecord } from "../../src/audit/audit-log.js";
import type { Redactor } from "../../src/util/redact.js";
import { fakePemLines } from "../helpers/fake-secrets.js";

/** A trail under test; `another` opens a second handle on the same store (another process). */
export interface AuditLogHarness {
  log: AuditLog;
  another(): Promise<AuditLog>;
  dispose(): Promise<void>;
}

export type AuditLogFactory = (options: {
  limits?: Partial<AuditLimits>;
  now: () => Date;
  redactor?: Redactor;
}) => Promise<AuditLogHarness>;

export const TOKEN = `ghs_${"Zx9Qw8Er7T".repeat(4)}`;

let counter = 0;

/** A run id no other test (or earlier run against the same store) uses. */
export function uniqueRunId(): string {
  counter += 1;
  return `run${String(counter).padStart(4, "0")}x${String(process.pid)}x${String(Date.now())}`;
}

export function requested(runId: string, actor = "octocat"): Omit<AuditEntry, "at"> {
  return {
    action: "run.requested",
    repo: "acme/widgets",
    installationId: 7,
    issue: 12,
    runId,
    actor,
    details: { trigger: "comment", intent: "fix the typo" },
  };
}

/** The behaviour every audit trail adapter must show. */
export function describeAuditLogConformance(name: string, factory: AuditLogFactory): void {
  describe(`audit trail conformance: ${name}`, () => {
    const disposers: Array<() => Promise<void>> = [];
    let clock = Date.parse("2026-11-22T09:00:00.000Z");
    const now = (): Date => new Date((clock += 1000));
    const open = async (
      extra: { limits?: Partial<AuditLimits>; redactor?: Redactor } = {},
    ): Promise<AuditLogHarness> => {
      const harness = await factory({ now, ...extra });
      disposers.push(() => harness.dispose());
      return harness;
    };
    /** Entries recorded by this test only: the store may be shared with earlier tests. */
    const since = async (log: AuditLog, afterSeq: number): Promise<AuditRecord[]> => log.after(afterSeq, 100_000);
    const lastSeq = async (log: AuditLog): Promise<number> => {
      let seq = 0;
      for (let page = await log.after(0, 1000); page.length > 0; page = await log.after(seq, 1000))
        seq = page.at(-1)?.seq ?? seq;
      return seq;
    };
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });

    test(
      "entries come back as recorded, in order, with " + "increasing seqs and the clock's time unless given one",
      async () => {
        const { log } = await open();
        const start = await lastSeq(log);
        const runId = uniqueRunId();
        await log.record(requested(runId));
        await log.record({
          action: "token.minted",
          repo: "acme/widgets",
          installationId: 7,
          runId,
          details: {
            permissions: ["contents:write", "pull_requests:write"],
            repositories: ["acme/widgets"],
            expiresInMinutes: 60,
            forked: false,
          },
        });
        await log.record({
          action: "run.finished",
          repo: "acme/widgets",
          runId,
          at: "2026-11-22T10:00:00+02:00",
          details: { state: "succeeded" },
        });
        const records = await since(log, start);
        expect(records).toHaveLength(3);
        const [first, second, third] = records;
        expect(first).toEqual({
          seq: first?.seq,
          at: expect.stringMatching(/^2026-11-22T09:\d\d:\d\d\.000Z$/) as unknown,
          action: "run.requested",
          repo: "acme/widgets",
          installationId: 7,
          issue: 12,
          runId,
          actor: "octocat",
          details: { trigger: "comment", intent: "fix the typo" },
        });
        expect(second?.details).toEqual({
          permissions: ["contents:write", "pull_requests:write"],
          repositories: ["acme/widgets"],
          expiresInMinutes: 60,
          forked: false,
        });
        expect(third?.at).toBe("2026-11-22T08:00:00.000Z");
        expect(third?.actor).toBeUndefined();
        expect(Date.parse(second?.at ?? "")).toBeGreaterThan(Date.parse(first?.at ?? ""));
        const seqs = records.map((record) => record.seq);
        expect(seqs[0]).toBeGreaterThan(start);
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
        expect(new Set(seqs).size).toBe(3);
      },
    );

    test("after pages through the trail: oldest first, seq > cursor, at most limit, nothing past the end", async () => {
      const { log } = await open();
      const start = await lastSeq(log);
      const runId = uniqueRunId();
      for (let i = 0; i < 7; i++) await log.record({ ...requested(runId), details: { n: i } });
      const paged: AuditRecord[] = [];
      let cursor = start;
      for (let page = await log.after(cursor, 3); page.length > 0; page = await log.after(cursor, 3)) {
        expect(page.length).toBeLessThanOrEqual(3);
        paged.push(...page);
        cursor = page.at(-1)?.seq ?? cursor;
      }
      expect(paged.map((record) => record.details?.["n"])).toEqual([0, 1, 2, 3, 4, 5, 6]);
      expect(paged).toEqual(await since(log, start));
      expect(await log.after(cursor, 10)).toEqual([]);
      expect(await log.after(start, 0)).toEqual([]);
      const middle = paged[3]?.seq ?? 0;
      expect((await log.after(middle, 2)).map((record) => record.details?.["n"])).toEqual([4, 5]);
    });

    test("forRun gives one run's entries, oldest first, up to its limit, and nothing of other runs", async () => {
      const { log } = await open();
      const [a, b] = [uniqueRunId(), uniqueRunId()];
      await log.record(requested(a, "alice"));
      await log.record(requested(b, "bob"));
      await log.record({
        action: "request.refused",
        repo: "acme/widgets",
        actor: "mallory",
        details: { reason: "below the permission bar" },
      });
      await log.record({
        action: "branch.pushed",
        repo: "acme/widgets",
        runId: a,
        details: { branch: "harness/issue-12", commit: "0123456789abcdef" },
      });
      await log.record({
        action: "pull_request.opened",
        repo: "acme/widgets",
        runId: a,
        details: { url: "https://github.com/acme/widgets/pull/3", number: 3 },
      });
      const forA = await log.forRun(a);
      expect(forA.map((record) => record.action)).toEqual(["run.requested", "branch.pushed", "pull_request.opened"]);
      expect(forA.every((record) => record.runId === a)).toBe(true);
      expect(forA.map((record) => record.seq)).toEqual([...forA.map((record) => record.seq)].sort((x, y) => x - y));
      expect((await log.forRun(b)).map((record) => record.actor)).toEqual(["bob"]);
      expect((await log.forRun(a, 2)).map((record) => record.action)).toEqual(["run.requested", "branch.pushed"]);
      expect(await log.forRun(uniqueRunId())).toEqual([]);
      // The same records as the export shows.
      const exported = (await since(log, (forA[0]?.seq ?? 1) - 1)).filter((record) => record.runId === a);
      expect(forA).toEqual(exported);
    });

    test("every string is bounded: long values cut, long lists shortened, too many details dropped", async () => {
      const { log } = await open();
      const start = await lastSeq(log);
      const runId = uniqueRunId();
      const huge = "x".repeat(200_000);
      const manyKeys = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`key${String(i)}`, i]));
      await log.record({
        action: "run.requested",
        repo: huge,
        runId,
        actor: huge,
        requestId: huge,
        details: { intent: huge, labels: Array.from({ length: 500 }, () => "label"), [huge]: "long key", ...manyKeys },
      });
      const [record] = await since(log, start);
      expect(record).toBeDefined();
      for (const value of [record?.repo, record?.actor, record?.requestId, record?.details?.["intent"]]) {
        expect(typeof value).toBe("string");
        expect((value as string).length).toBeLessThanOrEqual(1000);
        expect((value as string).startsWith("xxxx")).toBe(true);
      }
      expect(record?.details?.["labels"]).toHaveLength(50);
      const keys = Object.keys(record?.details ?? {});
      expect(keys.length).toBeLessThanOrEqual(31);
      expect(keys.every((key) => key.length <= 64)).toBe(true);
      expect(record?.details?.["_truncated"]).toBe(true);
      expect(JSON.stringify(record).length).toBeLessThan(30_000);
      // The bounds also hold for what a run page reads.
      expect(await log.forRun(runId)).toEqual([record]);
    });

    test("the detail budget drops whole details, and marks that some were dropped", async () => {
      const { log } = await open({ limits: { maxDetailChars: 2_500 } });
      const start = await lastSeq(log);
      await log.record({
        action: "token.minted",
        repo: "acme/widgets",
        details: { a: "1".repeat(1000), b: "2".repeat(1000), c: "3".repeat(1000), d: "4" },
      });
      const [record] = await since(log, start);
      expect(record?.details).toEqual({ a: "1".repeat(1000), b: "2".repeat(1000), _truncated: true });
    });

    test("past maxEntries the oldest entries are dropped, from the export and from run pages alike", async () => {
      const { log } = await open({ limits: { maxEntries: 5 } });
      const runId = uniqueRunId();
      const other = uniqueRunId();
      for (let i = 0; i < 12; i++) await log.record({ ...requested(i % 2 === 0 ? runId : other), details: { n: i } });
      const kept = await log.after(0, 100);
      expect(kept.map((record) => record.details?.["n"])).toEqual([7, 8, 9, 10, 11]);
      expect((await log.forRun(runId)).map((record) => record.details?.["n"])).toEqual([8, 10]);
      expect((await log.forRun(other)).map((record) => record.details?.["n"])).toEqual([7, 9, 11]);
      // Paging from a cursor older than what is kept starts at the oldest kept entry.
      expect((await log.after(1, 2)).map((record) => record.details?.["n"])).toEqual([7, 8]);
      await log.record({ ...requested(runId), details: { n: 12 } });
      expect((await log.after(0, 100)).map((record) => record.details?.["n"])).toEqual([8, 9, 10, 11, 12]);
    });

    test("no token is stored: the redactor runs over every string, whoever the caller", async () => {
      const { log } = await open();
      const start = await lastSeq(log);
      const runId = uniqueRunId();
      await log.record({
        action: "token.minted",
        repo: "acme/widgets",
        runId,
        actor: `bot ${TOKEN}`,
        details: {
          token: TOKEN,
          note: `minted ${TOKEN} for the run`,
          repositories: ["acme/widgets", TOKEN],
          url: `https://x-access-token:${TOKEN}@github.com/acme/widgets.git`,
        },
      });
      const stored = await since(log, start);
      const text = JSON.stringify([stored, await log.forRun(runId)]);
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain(TOKEN.slice(4, 24));
      expect(stored[0]?.details?.["token"]).toBe("[REDACTED]");
      expect(stored[0]?.details?.["note"]).toBe("minted [REDACTED] for the run");
      expect(stored[0]?.details?.["repositories"]).toEqual(["acme/widgets", "[REDACTED]"]);
      expect(stored[0]?.actor).toBe("bot [REDACTED]");
    });

    test("a token cut off where an overlong value is cut is still not stored", async () => {
      const { log } = await open();
      const start = await lastSeq(log);
      // Past the length up to which values are redacted whole, with a token across that cut. The
      // private key before it shrinks to "[REDACTED]", so what is left of the token would land
      // within the 1,000 characters kept.
      const pem = fakePemLines();
      const begin = `${pem.header}\n`;
      const end = `\n${pem.footer} `;
      const key = `${begin}${"A".repeat(64 * 1024 - 15 - begin.length - end.length)}${end}`;
      const value = `${key}${TOKEN}${" tail".repeat(100)}`;
      await log.record({ action: "run.requested", repo: "acme/widgets", details: { intent: value } });
      expect(JSON.stringify(await since(log, start))).not.toContain(TOKEN.slice(4, 14));
    });

    test(
      "a redactor given in the options catches the " + "deployment's own secrets, and tokens are still caught",
      async () => {
        const { log } = await open({ redactor: (text) => text.replaceAll("hunter2-secret-value", "[REDACTED]") });
        const start = await lastSeq(log);
        await log.record({
          action: "request.refused",
          repo: "acme/widgets",
          details: { reason: `saw hunter2-secret-value and ${TOKEN} in the intent` },
        });
        expect((await since(log, start))[0]?.details?.["reason"]).toBe("saw [REDACTED] and [REDACTED] in the intent");
      },
    );

    test("a second handle sees the first one's entries, and seqs keep rising across handles", async () => {
      const harness = await open();
      const other = await harness.another();
      const start = await lastSeq(harness.log);
      const runId = uniqueRunId();
      await harness.log.record(requested(runId, "first"));
      await other.record(requested(runId, "second"));
      await harness.log.record(requested(runId, "third"));
      const fromOther = await since(other, start);
      expect(fromOther.map((record) => record.actor)).toEqual(["first", "second", "third"]);
      expect(await since(harness.log, start)).toEqual(fromOther);
      expect((await other.forRun(runId)).map((record) => record.actor)).toEqual(["first", "second", "third"]);
    });

    test("entries recorded at once all get their own seq", async () => {
      const { log } = await open();
      const start = await lastSeq(log);
      const runId = uniqueRunId();
      await Promise.all(Array.from({ length: 40 }, (_, i) => log.record({ ...requested(runId), details: { n: i } })));
      const records = await since(log, start);
      expect(records).toHaveLength(40);
      expect(new Set(records.map((record) => record.seq)).size).toBe(40);
      expect(new Set(records.map((record) => record.details?.["n"])).size).toBe(40);
      expect(await log.forRun(runId, 1000)).toEqual(records);
    });
  });
}
