import { afterEach, describe, expect, test } from "vitest";
import {
  INBOX_MAX_AGE_MS,
  MAX_INBOX_KEY_LENGTH,
  MAX_INBOX_PAYLOAD_BYTES,
  type InboxDelivery,
  type NewInboxDelivery,
  type WebhookInbox,
} from "../../src/triggers/inbox/port.js";

/** An inbox under test; `another` opens a second handle on the same inbox, as another process would. */
export interface InboxHarness {
  inbox: WebhookInbox;
  another: () => Promise<WebhookInbox>;
  dispose: () => Promise<void>;
}

export type InboxFactory = () => Promise<InboxHarness>;

const T0 = Date.parse("2026-11-29T09:00:00.000Z");
const LEASE = 30_000;

let deliveries = 0;

/** A handler's share of a fresh delivery, received `ago` ms before T0 (so older ones sort first). */
function delivery(overrides: Partial<NewInboxDelivery> = {}): NewInboxDelivery {
  deliveries += 1;
  const deliveryId = `d${String(deliveries)}-0f3c9a4e`;
  return {
    key: `${deliveryId}/issue_comment.created`,
    deliveryId,
    name: "issue_comment",
    handler: "issue_comment.created",
    payload: JSON.stringify({ action: "created", comment: { id: deliveries, body: "@harness fix it" } }),
    receivedAt: T0,
    ...overrides,
  };
}

function claimed(kept: NewInboxDelivery, attempts: number): InboxDelivery {
  return { ...kept, attempts };
}

/**
 * The behaviour every inbox must show: the in-memory one's. `durable` inboxes are also checked to
 * keep their deliveries and progress when closed and opened again.
 */
export function describeWebhookInboxConformance(
  name: string,
  factory: InboxFactory,
  { durable = true }: { durable?: boolean } = {},
): void {
  describe(`webhook inbox conformance: ${name}`, () => {
    const disposers: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });
    async function open(): Promise<InboxHarness> {
      const harness = await factory();
      disposers.push(harness.dispose);
      return harness;
    }

    test("a kept delivery is not claimed while its hold lasts, lease instant included", async () => {
      const { inbox } = await open();
      await inbox.keep(delivery(), "web-1", T0 + LEASE);
      expect(await inbox.claim("web-2", T0 + 1, T0 + 2 * LEASE, 10)).toEqual([]);
      expect(await inbox.claim("web-2", T0 + LEASE, T0 + 2 * LEASE, 10)).toEqual([]);
    });

    test("once the hold lapsed it is claimed for the new owner, its attempt counted", async () => {
      const { inbox } = await open();
      const kept = delivery();
      await inbox.keep(kept, "web-1", T0 + LEASE);
      expect(await inbox.claim("web-2", T0 + LEASE + 1, T0 + 3 * LEASE, 10)).toEqual([claimed(kept, 2)]);
      // The new owner holds it now, the old one no longer does.
      expect(await inbox.renew("web-1", [kept.key], T0 + 4 * LEASE)).toBe(0);
      expect(await inbox.renew("web-2", [kept.key], T0 + 4 * LEASE)).toBe(1);
    });

    test("a claim takes the oldest first and no more than its limit", async () => {
      const { inbox } = await open();
      const newest = delivery({ key: "a/h", receivedAt: T0 - 1_000 });
      const oldest = delivery({ key: "b/h", receivedAt: T0 - 3_000 });
      const middle = delivery({ key: "c/h", receivedAt: T0 - 2_000 });
      for (const kept of [newest, oldest, middle]) await inbox.keep(kept, "web-1", T0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 2)).toEqual([claimed(oldest, 2), claimed(middle, 2)]);
      expect(await inbox.claim("web-3", T0 + 1, T0 + LEASE, 2)).toEqual([claimed(newest, 2)]);
      expect(await inbox.claim("web-4", T0 + 1, T0 + LEASE, 2)).toEqual([]);
    });

    test("a limit of nothing takes nothing and leaves the lapsed deliveries for the next claim", async () => {
      const { inbox } = await open();
      const kept = delivery();
      await inbox.keep(kept, "web-1", T0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 0)).toEqual([]);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 1)).toEqual([claimed(kept, 2)]);
    });

    test("a claimed delivery is not claimed again until its new hold lapses", async () => {
      const { inbox } = await open();
      const kept = delivery();
      await inbox.keep(kept, "web-1", T0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 10)).toHaveLength(1);
      expect(await inbox.claim("web-3", T0 + 2, T0 + 2 * LEASE, 10)).toEqual([]);
      expect(await inbox.claim("web-3", T0 + LEASE, T0 + 2 * LEASE, 10)).toEqual([]);
      expect(await inbox.claim("web-3", T0 + LEASE + 1, T0 + 2 * LEASE, 10)).toEqual([claimed(kept, 3)]);
    });

    test("renew extends only the owner's holds and counts them", async () => {
      const { inbox } = await open();
      const [first, second, theirs] = [delivery(), delivery(), delivery()];
      await inbox.keep(first, "web-1", T0 + LEASE);
      await inbox.keep(second, "web-1", T0 + LEASE);
      await inbox.keep(theirs, "web-2", T0 + LEASE);
      expect(await inbox.renew("web-1", [first.key, second.key, theirs.key, "never-kept/h"], T0 + 5 * LEASE)).toBe(2);
      expect(await inbox.renew("web-1", [], T0 + 5 * LEASE)).toBe(0);
      // web-2's hold was left as it was: it lapses on time, web-1's extended ones do not.
      expect(await inbox.claim("web-3", T0 + LEASE + 1, T0 + 10 * LEASE, 10)).toEqual([claimed(theirs, 2)]);
      expect(await inbox.claim("web-3", T0 + 5 * LEASE + 1, T0 + 10 * LEASE, 10)).toEqual([
        claimed(first, 2),
        claimed(second, 2),
      ]);
    });

    test("an old owner cannot renew a hold claimed away from it", async () => {
      const { inbox } = await open();
      const kept = delivery();
      await inbox.keep(kept, "web-1", T0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 10)).toHaveLength(1);
      expect(await inbox.renew("web-1", [kept.key], T0 + 100 * LEASE)).toBe(0);
      // Still web-2's lease, not the one web-1 asked for.
      expect(await inbox.claim("web-3", T0 + LEASE + 1, T0 + 2 * LEASE, 10)).toEqual([claimed(kept, 3)]);
    });

    test("a released delivery is gone: never claimed, never renewed", async () => {
      const { inbox } = await open();
      const [done, other] = [delivery(), delivery()];
      await inbox.keep(done, "web-1", T0);
      await inbox.keep(other, "web-1", T0);
      await inbox.release(done.key);
      await inbox.release("never-kept/h");
      expect(await inbox.renew("web-1", [done.key], T0 + LEASE)).toBe(0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 10)).toEqual([claimed(other, 2)]);
    });

    test("keeping a key again replaces it: new payload, owner and hold, attempts back at one", async () => {
      const { inbox } = await open();
      const first = delivery({ key: "d1/h", payload: '{"v":1}' });
      await inbox.keep(first, "web-1", T0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 10)).toEqual([claimed(first, 2)]);
      const again = { ...first, payload: '{"v":2}', receivedAt: T0 + 5 };
      await inbox.keep(again, "web-3", T0 + 2 * LEASE);
      expect(await inbox.renew("web-2", [first.key], T0 + 3 * LEASE)).toBe(0);
      expect(await inbox.claim("web-4", T0 + LEASE + 1, T0 + 4 * LEASE, 10)).toEqual([]);
      expect(await inbox.claim("web-4", T0 + 2 * LEASE + 1, T0 + 4 * LEASE, 10)).toEqual([claimed(again, 2)]);
    });

    test("a lapsed delivery older than the maximum age is dropped by a claim, not returned", async () => {
      const { inbox } = await open();
      const now = T0 + INBOX_MAX_AGE_MS;
      const aged = delivery({ receivedAt: T0 - 1 });
      const justInTime = delivery({ receivedAt: T0 });
      await inbox.keep(aged, "web-1", T0 + LEASE);
      await inbox.keep(justInTime, "web-1", T0 + LEASE);
      expect(await inbox.claim("web-2", now, now + LEASE, 10)).toEqual([claimed(justInTime, 2)]);
      // Dropped, not merely skipped: nobody holds it any more.
      expect(await inbox.renew("web-1", [aged.key], now + LEASE)).toBe(0);
      // By the time web-2's hold lapses, its delivery has aged too, and goes the same way.
      expect(await inbox.claim("web-3", now + LEASE + 1, now + 2 * LEASE, 10)).toEqual([]);
      expect(await inbox.renew("web-2", [justInTime.key], now + 2 * LEASE)).toBe(0);
    });

    test("a stranger's payload and odd names come back byte for byte", async () => {
      const { inbox } = await open();
      const payload = JSON.stringify({
        comment: {
          body:
            "héllo ✓ 🎉 «quotes» \"double\" 'single' `back` ]] [[ ]=] --[[ comment ]] " +
            "redis.call('FLUSHALL') cjson.decode('{') \\ \\u0000 \r\n\t end) return {} %s %d",
        },
        emptyish: ["", " ", "{}", "[]", null],
      });
      const kept = delivery({
        key: "d'1\"]] {x}/issue_comment.created 🎉",
        deliveryId: "d'1\"]] {x}",
        name: "issue_comment",
        handler: "handler with spaces ]] 'quoted'",
        payload,
      });
      await inbox.keep(kept, "web-1 'owner' ]]", T0);
      const [back] = await inbox.claim("web-2 ✓", T0 + 1, T0 + LEASE, 10);
      expect(back).toEqual(claimed(kept, 2));
      expect(Buffer.from(back!.payload).equals(Buffer.from(payload))).toBe(true);
      expect(await inbox.renew("web-2 ✓", [kept.key], T0 + 2 * LEASE)).toBe(1);
    });

    test("a payload of exactly the largest size is kept, bytes counted and not characters", async () => {
      const { inbox } = await open();
      // Two bytes a character: the limit in characters would let twice the bytes through.
      const largest = delivery({ payload: "é".repeat(MAX_INBOX_PAYLOAD_BYTES / 2) });
      await inbox.keep(largest, "web-1", T0);
      await expect(inbox.keep(delivery({ payload: `${largest.payload}x` }), "web-1", T0)).rejects.toThrow(RangeError);
      const [back] = await inbox.claim("web-2", T0 + 1, T0 + LEASE, 10);
      expect(back?.payload === largest.payload).toBe(true);
    });

    test("an oversize payload, an empty key and an oversize key are refused, and nothing is kept", async () => {
      const { inbox } = await open();
      const refused = [
        delivery({ payload: "x".repeat(MAX_INBOX_PAYLOAD_BYTES + 1) }),
        delivery({ key: "" }),
        delivery({ key: "k".repeat(MAX_INBOX_KEY_LENGTH + 1) }),
      ];
      for (const kept of refused) await expect(inbox.keep(kept, "web-1", T0)).rejects.toThrow(RangeError);
      const longest = delivery({ key: "k".repeat(MAX_INBOX_KEY_LENGTH) });
      await inbox.keep(longest, "web-1", T0);
      expect(await inbox.claim("web-2", T0 + 1, T0 + LEASE, 10)).toEqual([claimed(longest, 2)]);
      await expect(inbox.noteProgress("", { runId: "r1" }, T0)).rejects.toThrow(RangeError);
      await expect(inbox.noteProgress("k".repeat(MAX_INBOX_KEY_LENGTH + 1), { runId: "r1" }, T0)).rejects.toThrow(
        RangeError,
      );
    });

    test("progress comes back as noted, a status comment only once noted, a later note replacing it", async () => {
      const { inbox } = await open();
      expect(await inbox.progressOf("req-1", T0)).toBeUndefined();
      await inbox.noteProgress("req-1", { runId: "run-1" }, T0);
      expect(await inbox.progressOf("req-1", T0 + 1)).toStrictEqual({ runId: "run-1" });
      await inbox.noteProgress("req-1", { runId: "run-1", statusCommentId: 987_654_321_012 }, T0 + 2);
      expect(await inbox.progressOf("req-1", T0 + 3)).toStrictEqual({
        runId: "run-1",
        statusCommentId: 987_654_321_012,
      });
      await inbox.noteProgress("req-1", { runId: "run-2" }, T0 + 4);
      expect(await inbox.progressOf("req-1", T0 + 5)).toStrictEqual({ runId: "run-2" });
      expect(await inbox.progressOf("req-2", T0 + 5)).toBeUndefined();
    });

    test("progress is gone once older than the maximum age, by the caller's clock", async () => {
      const { inbox } = await open();
      await inbox.noteProgress("req-1", { runId: "run-1", statusCommentId: 7 }, T0);
      await inbox.noteProgress("req-2", { runId: "run-2" }, T0 + 10);
      expect(await inbox.progressOf("req-1", T0 + INBOX_MAX_AGE_MS)).toStrictEqual({
        runId: "run-1",
        statusCommentId: 7,
      });
      expect(await inbox.progressOf("req-1", T0 + INBOX_MAX_AGE_MS + 1)).toBeUndefined();
      // A note made after that one does not bring the stale one back.
      await inbox.noteProgress("req-3", { runId: "run-3" }, T0 + INBOX_MAX_AGE_MS + 1);
      expect(await inbox.progressOf("req-1", T0 + INBOX_MAX_AGE_MS + 1)).toBeUndefined();
      expect(await inbox.progressOf("req-2", T0 + INBOX_MAX_AGE_MS + 1)).toStrictEqual({ runId: "run-2" });
    });

    test("another handle sees what one kept, and of two claiming at once only one takes it", async () => {
      const { inbox, another } = await open();
      const other = await another();
      const kept = delivery();
      await inbox.keep(kept, "web-1", T0);
      await other.noteProgress("req-1", { runId: "run-1" }, T0);
      expect(await inbox.progressOf("req-1", T0)).toStrictEqual({ runId: "run-1" });
      const [mine, theirs] = await Promise.all([
        inbox.claim("web-2", T0 + 1, T0 + LEASE, 10),
        other.claim("web-3", T0 + 1, T0 + LEASE, 10),
      ]);
      expect([...mine, ...theirs]).toEqual([claimed(kept, 2)]);
    });

    test("close settles, and a second close too", async () => {
      const { inbox } = await open();
      await inbox.keep(delivery(), "web-1", T0);
      await expect(inbox.close()).resolves.toBeUndefined();
      await expect(inbox.close()).resolves.toBeUndefined();
    });

    if (durable)
      test("deliveries and progress outlive the handle that kept them", async () => {
        const { inbox, another } = await open();
        const kept = delivery();
        await inbox.keep(kept, "web-1", T0);
        await inbox.noteProgress("req-1", { runId: "run-1", statusCommentId: 5 }, T0);
        await inbox.close();
        const reopened = await another();
        expect(await reopened.progressOf("req-1", T0 + 1)).toStrictEqual({ runId: "run-1", statusCommentId: 5 });
        expect(await reopened.claim("web-2", T0 + 1, T0 + LEASE, 10)).toEqual([claimed(kept, 2)]);
      });
  });
}
