import { afterEach, describe, expect, test } from "vitest";
import {
  DEFAULT_PENDING_LIMITS,
  MAX_PENDING_INTENT_BYTES,
  type PendingRequest,
  type PendingRequestInput,
  type PendingRequestStore,
  type PendingRequestStoreOptions,
  type PutOutcome,
} from "../../src/runs/pending/port.js";

/** A store under test; `another` opens a second handle on the same store, as another process would. */
export interface PendingRequestHarness {
  store: PendingRequestStore;
  another: () => Promise<PendingRequestStore>;
  dispose: () => Promise<void>;
}

export type PendingRequestFactory = (options: PendingRequestStoreOptions) => Promise<PendingRequestHarness>;

const ISSUE = "101#7";
const OTHER_ISSUE = "101#8";
const HOUR = 3600_000;

const alice = { login: "Alice", id: 1001 };
const bob = { login: "bob", id: 1002 };
const carol = { login: "carol", id: 1003 };
const dave = { login: "dave", id: 1004 };

let commentId = 0;

function ask(requester: { login: string; id: number }, intent: string, issueKey = ISSUE): PendingRequestInput {
  commentId += 1;
  return { issueKey, intent, requester, commentId };
}

function storing(outcome: PutOutcome): Extract<PutOutcome, { status: "stored" }> {
  if (outcome.status !== "stored") throw new Error(`expected the request to be stored, got ${JSON.stringify(outcome)}`);
  return outcome;
}

function stored(outcome: PutOutcome): PendingRequest {
  return storing(outcome).request;
}

/** Hands out the given ids in turn, then repeats the last. */
function idsInTurn(...ids: string[]): () => string {
  let next = 0;
  return () => ids[Math.min(next++, ids.length - 1)] ?? "";
}

/**
 * The behaviour every pending request store must show. `durable` stores are also checked to keep
 * their requests and reply windows when closed and opened again.
 */
export function describePendingRequestConformance(
  name: string,
  factory: PendingRequestFactory,
  { durable = true }: { durable?: boolean } = {},
): void {
  describe(`pending request store conformance: ${name}`, () => {
    const disposers: Array<() => Promise<void>> = [];
    const start = Date.parse("2026-11-22T09:00:00.000Z");
    let clock = start;
    const now = (): number => clock;
    const open = async (options: Omit<PendingRequestStoreOptions, "now"> = {}): Promise<PendingRequestHarness> => {
      clock = start;
      const harness = await factory({ now, ...options });
      disposers.push(() => harness.dispose());
      return harness;
    };
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });

    test("a request is taken by its id (any case), once, and never from another issue", async () => {
      const { store } = await open();
      const intent = 'fix the "typo" in README\n\n  keep the 1 2 {spacing} 🎉';
      const request = stored(await store.put(ask(alice, intent)));
      expect(request).toMatchObject({
        issueKey: ISSUE,
        intent,
        requester: alice,
        createdAt: start,
        expiresAt: start + DEFAULT_PENDING_LIMITS.ttlMs,
      });
      expect(request.id).toMatch(/^[a-z0-9]+$/);
      expect(await store.list(ISSUE)).toEqual([request]);

      expect(await store.take(OTHER_ISSUE, request.id)).toBeUndefined();
      expect(await store.take(ISSUE, ` ${request.id.toUpperCase()} `)).toEqual(request);
      expect(await store.take(ISSUE, request.id)).toBeUndefined();
      expect(await store.list(ISSUE)).toEqual([]);
    });

    test("a held review keeps its review id through list, replacement and take", async () => {
      const { store } = await open();
      const review = stored(
        await store.put({
          ...ask(alice, "Review by @alice:\nrename the flag"),
          commentId: 501,
          review: { reviewId: 501 },
        }),
      );
      expect(review.review).toEqual({ reviewId: 501 });
      expect(await store.list(ISSUE)).toEqual([review]);
      const comment = stored(await store.put(ask(bob, "fix the typo")));
      expect(comment.review).toBeUndefined();

      clock += 1000;
      const newer = await store.put({
        ...ask(alice, "Review by @alice:\nand the docs"),
        commentId: 502,
        review: { reviewId: 502 },
      });
      expect(newer).toMatchObject({ status: "stored", replaced: { id: review.id, review: { reviewId: 501 } } });
      const taken = await store.take(ISSUE, stored(newer).id);
      expect(taken).toMatchObject({ intent: "Review by @alice:\nand the docs", review: { reviewId: 502 } });
      expect(await store.take(ISSUE, comment.id)).toEqual(comment);
    });

    test("two outsiders: approving A's id gives A's intent, never B's, though B asked last", async () => {
      const { store } = await open();
      const typo = stored(await store.put(ask(alice, "fix the typo in README")));
      clock += 1000;
      const malicious = stored(await store.put(ask(bob, "add my SSH key to deploy.yml")));
      expect(typo.id).not.toBe(malicious.id);

      const approved = await store.take(ISSUE, typo.id);
      expect(approved).toMatchObject({ intent: "fix the typo in README", requester: alice });
      expect(await store.list(ISSUE)).toEqual([malicious]);
      expect(await store.take(ISSUE, typo.id)).toBeUndefined();
    });

    test("a bare approve takes the only pending request, and refuses to guess between two", async () => {
      const { store } = await open();
      expect(await store.takeOnly(ISSUE)).toEqual({ status: "none" });

      const only = stored(await store.put(ask(alice, "fix the typo")));
      expect(await store.takeOnly(ISSUE)).toEqual({ status: "taken", request: only });
      expect(await store.list(ISSUE)).toEqual([]);

      const first = stored(await store.put(ask(alice, "fix the typo")));
      clock += 1000;
      const second = stored(await store.put(ask(bob, "bump the version")));
      expect(await store.takeOnly(ISSUE)).toEqual({ status: "ambiguous", pending: [first, second] });
      expect(await store.list(ISSUE)).toEqual([first, second]);
      expect(await store.takeOnly(OTHER_ISSUE)).toEqual({ status: "none" });
    });

    test("lists an issue's requests oldest first", async () => {
      const { store } = await open();
      const made: PendingRequest[] = [];
      for (const person of [carol, alice, bob]) {
        made.push(stored(await store.put(ask(person, `from ${person.login}`))));
        clock += 1000;
      }
      stored(await store.put(ask(dave, "elsewhere", OTHER_ISSUE)));
      expect((await store.list(ISSUE)).map((request) => request.requester.login)).toEqual(["carol", "Alice", "bob"]);
      expect(await store.list(ISSUE)).toEqual(made);
    });

    test("a second request from the same person replaces the first under a new id, even at the caps", async () => {
      const { store } = await open({
        limits: { maxPerIssue: 1, maxPerPerson: 1 },
        newId: idsInTurn("aaaaaa", "aaaaaa", "bbbbbb"),
      });
      const first = stored(await store.put(ask(alice, "fix the typo")));
      clock += 1000;
      const { request: second, replaced } = storing(
        await store.put(ask({ ...alice, login: "alice-renamed" }, "actually, delete the tests")),
      );
      expect(replaced).toEqual(first);
      expect(second.id).toBe("bbbbbb");

      // A maintainer approving what they read (the first text) must not get the replacement.
      expect(await store.take(ISSUE, first.id)).toBeUndefined();
      expect(await store.list(ISSUE)).toEqual([second]);
    });

    test(
      "Harness's reply is attached to a pending request and " + "handed back with it, so a replacement can edit it",
      async () => {
        const { store, another } = await open({ limits: { ttlMs: HOUR } });
        const first = stored(await store.put(ask(alice, "fix the typo")));
        expect(first.replyCommentId).toBeUndefined();
        expect(await store.attachReply(ISSUE, first.id.toUpperCase(), 9001)).toBe(true);
        expect(await (await another()).list(ISSUE)).toEqual([{ ...first, replyCommentId: 9001 }]);

        const { request: second, replaced } = storing(await store.put(ask(alice, "fix the typo, and the other one")));
        expect(replaced).toEqual({ ...first, replyCommentId: 9001 });
        expect(second.replyCommentId).toBeUndefined();
        expect(await store.attachReply(ISSUE, first.id, 9002)).toBe(false);
        expect(await store.attachReply(OTHER_ISSUE, second.id, 9002)).toBe(false);
        expect(await store.attachReply(ISSUE, second.id, 9001)).toBe(true);
        expect(await store.take(ISSUE, second.id)).toEqual({ ...second, replyCommentId: 9001 });
        expect(await store.attachReply(ISSUE, second.id, 9003)).toBe(false);

        const late = stored(await store.put(ask(bob, "bump the version")));
        clock += HOUR;
        expect(await store.attachReply(ISSUE, late.id, 9004)).toBe(false);
      },
    );

    test("ids are unique within an issue (a clashing id is generated again) but may repeat across issues", async () => {
      const { store } = await open({ newId: idsInTurn("k7q2m9", "k7q2m9", "z1z1z1", "k7q2m9") });
      const fromAlice = stored(await store.put(ask(alice, "alice's request")));
      const fromBob = stored(await store.put(ask(bob, "bob's request")));
      const elsewhere = stored(await store.put(ask(carol, "carol's request", OTHER_ISSUE)));
      expect([fromAlice.id, fromBob.id, elsewhere.id]).toEqual(["k7q2m9", "z1z1z1", "k7q2m9"]);

      expect(await store.take(OTHER_ISSUE, "k7q2m9")).toMatchObject({ intent: "carol's request" });
      expect(await store.take(ISSUE, "K7Q2M9")).toMatchObject({ intent: "alice's request" });
    });

    test("a generator that only repeats itself is an error, and leaves what is pending alone", async () => {
      const { store } = await open({ newId: () => "samesame" });
      const kept = stored(await store.put(ask(alice, "fix the typo")));
      await expect(store.put(ask(bob, "bump the version"))).rejects.toThrow(/No free pending request id/);
      expect(await store.list(ISSUE)).toEqual([kept]);
    });

    test("the per-issue cap refuses a newcomer, counting only other people's requests", async () => {
      const { store } = await open({ limits: { maxPerIssue: 2 } });
      stored(await store.put(ask(alice, "one")));
      clock += 1000;
      stored(await store.put(ask(bob, "two")));
      expect(await store.put(ask(carol, "three"))).toEqual({ status: "refused", reason: "issue_full", limit: 2 });
      expect((await store.list(ISSUE)).map((request) => request.intent)).toEqual(["one", "two"]);

      expect(storing(await store.put(ask(bob, "two, reworded"))).replaced).toMatchObject({ intent: "two" });
      stored(await store.put(ask(carol, "three", OTHER_ISSUE)));

      const taken = (await store.list(ISSUE))[0]!;
      expect(await store.take(ISSUE, taken.id)).toBeDefined();
      stored(await store.put(ask(carol, "three, now there is room")));
    });

    test(
      "the per-person cap counts one person's requests " + "across issues and repositories; taking frees a place",
      async () => {
        const { store } = await open({ limits: { maxPerPerson: 2 } });
        const first = stored(await store.put(ask(alice, "one", "101#1")));
        stored(await store.put(ask(alice, "two", "202#5")));
        expect(await store.put(ask(alice, "three", "303#9"))).toEqual({
          status: "refused",
          reason: "person_full",
          limit: 2,
        });
        stored(await store.put(ask(bob, "bob's", "303#9")));

        expect(await store.take("101#1", first.id)).toBeDefined();
        stored(await store.put(ask(alice, "three", "303#9")));
        expect(await store.put(ask(alice, "four", "404#2"))).toMatchObject({
          status: "refused",
          reason: "person_full",
        });

        expect(await store.takeOnly("202#5")).toMatchObject({ status: "taken", request: { intent: "two" } });
        stored(await store.put(ask(alice, "four", "404#2")));
      },
    );

    test("requests expire after the TTL: not listed, not taken, not counted", async () => {
      const { store } = await open({ limits: { ttlMs: HOUR, maxPerIssue: 1, maxPerPerson: 1 } });
      const old = stored(await store.put(ask(alice, "fix the typo")));
      expect(old.expiresAt).toBe(start + HOUR);
      clock += HOUR - 1;
      expect(await store.list(ISSUE)).toEqual([old]);

      clock += 1;
      expect(await store.list(ISSUE)).toEqual([]);
      expect(await store.takeOnly(ISSUE)).toEqual({ status: "none" });
      expect(await store.take(ISSUE, old.id)).toBeUndefined();

      expect(storing(await store.put(ask(bob, "bump the version"))).replaced).toBeUndefined();
      const again = storing(await store.put(ask(alice, "fix the typo, again", OTHER_ISSUE)));
      expect(again.replaced).toBeUndefined();
      clock += HOUR;
      expect(await store.takeOnly(ISSUE)).toEqual({ status: "none" });
      expect(await store.take(OTHER_ISSUE, again.request.id)).toBeUndefined();
    });

    test("an expired request is not returned as replaced", async () => {
      const { store } = await open({ limits: { ttlMs: HOUR } });
      stored(await store.put(ask(alice, "old")));
      clock += HOUR;
      expect(storing(await store.put(ask(alice, "new"))).replaced).toBeUndefined();
    });

    test("another process sees the request and can take it; the first then cannot", async () => {
      const { store, another } = await open();
      const request = stored(await store.put(ask(alice, "fix the typo")));
      const second = await another();
      expect(await second.list(ISSUE)).toEqual([request]);
      expect(await second.take(ISSUE, request.id)).toEqual(request);
      expect(await store.take(ISSUE, request.id)).toBeUndefined();
      expect(await store.list(ISSUE)).toEqual([]);
    });

    test("two processes approving the same request at once: exactly one gets it", async () => {
      const { store, another } = await open();
      const second = await another();
      for (let round = 0; round < 10; round++) {
        const request = stored(await store.put(ask(alice, `round ${String(round)}`)));
        const results = await Promise.all([
          store.take(ISSUE, request.id),
          second.take(ISSUE, request.id),
          store.take(ISSUE, request.id),
          second.take(ISSUE, request.id),
        ]);
        expect(results.filter((result) => result !== undefined)).toEqual([request]);
      }
      for (let round = 0; round < 10; round++) {
        const request = stored(await store.put(ask(alice, `bare round ${String(round)}`)));
        const results = await Promise.all([
          store.takeOnly(ISSUE),
          second.takeOnly(ISSUE),
          store.takeOnly(ISSUE),
          second.takeOnly(ISSUE),
        ]);
        expect(results.filter((result) => result.status === "taken")).toEqual([{ status: "taken", request }]);
        expect(results.filter((result) => result.status === "none")).toHaveLength(3);
      }
    });

    test("two processes storing for the same person at once leave one request, and the cap holds", async () => {
      const { store, another } = await open({ limits: { maxPerPerson: 1 } });
      const second = await another();
      const outcomes = await Promise.all([
        store.put(ask(alice, "a")),
        second.put(ask(alice, "b")),
        store.put(ask(alice, "c", OTHER_ISSUE)),
        second.put(ask(alice, "d", OTHER_ISSUE)),
      ]);
      const pending = [...(await store.list(ISSUE)), ...(await store.list(OTHER_ISSUE))];
      expect(pending).toHaveLength(1);
      expect(outcomes.filter((outcome) => outcome.status === "refused")).not.toHaveLength(0);
    });

    test("a reply is claimed once per scope and login (any case) within its window, then again after it", async () => {
      const { store } = await open();
      const window = 10 * 60_000;
      expect(await store.claimReply(ISSUE, "Alice", window)).toBe(true);
      expect(await store.claimReply(ISSUE, "alice", window)).toBe(false);
      expect(await store.claimReply(ISSUE, "ALICE", window)).toBe(false);
      expect(await store.claimReply(ISSUE, "bob", window)).toBe(true);
      expect(await store.claimReply(OTHER_ISSUE, "alice", window)).toBe(true);

      clock += window - 1;
      expect(await store.claimReply(ISSUE, "alice", window)).toBe(false);
      clock += 1;
      expect(await store.claimReply(ISSUE, "alice", window)).toBe(true);
      expect(await store.claimReply(ISSUE, "alice", window)).toBe(false);
    });

    test("two processes claiming the same reply at once: exactly one may send it", async () => {
      const { store, another } = await open();
      const second = await another();
      for (let round = 0; round < 10; round++) {
        const scope = `${ISSUE}/round-${String(round)}`;
        const claims = await Promise.all([
          store.claimReply(scope, "alice", 60_000),
          second.claimReply(scope, "Alice", 60_000),
          store.claimReply(scope, "ALICE", 60_000),
          second.claimReply(scope, "alice", 60_000),
        ]);
        expect(claims.filter(Boolean)).toHaveLength(1);
      }
    });

    test(
      "what a stranger sends is bounded: oversized intents " + "and logins are refused, odd ids find nothing",
      async () => {
        const { store } = await open();
        const atLimit = "x".repeat(MAX_PENDING_INTENT_BYTES);
        expect(stored(await store.put(ask(alice, atLimit))).intent).toBe(atLimit);
        // Measured in bytes: 32,769 two-byte characters are over 64 KiB.
        await expect(store.put(ask(bob, "é".repeat(32_769)))).rejects.toThrow(/over the 65536-byte limit/);
        await expect(store.put(ask({ login: "x".repeat(40), id: 5 }, "fix"))).rejects.toThrow(/1 to 39 characters/);
        await expect(store.claimReply(ISSUE, "x".repeat(40), 60_000)).rejects.toThrow(/1 to 39 characters/);
        expect((await store.list(ISSUE)).map((request) => request.requester.login)).toEqual(["Alice"]);

        for (const typed of ["", "   ", "x".repeat(1000), "../aaaa", "k7q2m9; DROP", "*"])
          expect(await store.take(ISSUE, typed)).toBeUndefined();
        expect(await store.list(ISSUE)).toHaveLength(1);
      },
    );

    if (durable) {
      test("closed and opened again, the store still has its requests and reply windows", async () => {
        const { store, another } = await open();
        const request = stored(await store.put(ask(alice, "fix the typo")));
        expect(await store.claimReply(ISSUE, "alice", 60_000)).toBe(true);
        await store.close();

        const reopened = await another();
        expect(await reopened.list(ISSUE)).toEqual([request]);
        expect(await reopened.claimReply(ISSUE, "alice", 60_000)).toBe(false);
        expect(await reopened.take(ISSUE, request.id)).toEqual(request);
      });
    }
  });
}
