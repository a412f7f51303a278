import { describe, expect, test } from "vitest";
import { DeliveryKeeper } from "../../src/triggers/inbox/keeper.js";
import {
  MAX_INBOX_PAYLOAD_BYTES,
  MemoryWebhookInbox,
  type InboxDelivery,
  type WebhookInbox,
} from "../../src/triggers/inbox/port.js";
import { WorkTracker } from "../../src/util/idle.js";
import type { Log } from "../../src/util/log.js";

/*
 * The delivery keeper between the webhook's answer and its acknowledgement: two keepers on one
 * inbox stand for two processes; one that "dies" simply never finishes its work nor renews.
 * The clock is injected; nothing waits on a timer (`start` is only used for its first drain).
 */

const LEASE = 10_000;

function recordingLog(): Log & { lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> } {
  const lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = [];
  const at =
    (level: string) =>
    (obj: Record<string, unknown>, msg = ""): void => {
      lines.push({ level, msg, obj });
    };
  return { lines, info: at("info"), warn: at("warn"), error: at("error") };
}

function world(inbox: WebhookInbox = new MemoryWebhookInbox()) {
  let now = 1_000_000;
  const clock = {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
  const process = (owner: string) => {
    const log = recordingLog();
    const failures: unknown[] = [];
    const tracker = new WorkTracker((error) => failures.push(error));
    const keeper = new DeliveryKeeper({ inbox, owner, tracker, log, now: clock.now, leaseMs: LEASE, maxReplays: 2 });
    return { keeper, tracker, log, failures };
  };
  return { inbox, clock, process };
}

const delivery = (id: string) => ({
  deliveryId: id,
  name: "issue_comment",
  handler: "issue_comment.created",
  payload: { action: "created", comment: { id: 7, body: "/harness fix it ✓ \u2028 ]]" } },
});

/** Work that never ends: the process doing it was killed. */
const forever = (): Promise<void> => new Promise<void>(() => undefined);

describe("the delivery keeper", () => {
  test("keeps a delivery before the answer and lets go of it once the work is done", async () => {
    const { inbox, clock, process } = world();
    const web = process("web-1");
    let finish: () => void = () => undefined;
    const work = new Promise<void>((resolve) => (finish = resolve));
    await web.keeper.keep(delivery("d-1"), () => work);
    clock.advance(LEASE + 1);
    // Still held: nobody else may take it while its lease runs... and once it lapses, only then.
    const lapsed = await inbox.claim("probe", clock.now(), clock.now() + LEASE, 10);
    expect(lapsed.map((each) => each.key)).toEqual(["d-1/issue_comment.created"]);
    finish();
    await web.tracker.idle();
    expect(await inbox.claim("probe", clock.now() + 10 * LEASE, clock.now() + 11 * LEASE, 10)).toEqual([]);
  });

  test("a process dies mid-acknowledgement: another works its delivery once, payload as received", async () => {
    const { clock, process } = world();
    const dead = process("web-1");
    const live = process("web-2");
    await dead.keeper.keep(delivery("d-1"), forever);
    const replayed: InboxDelivery[] = [];
    const replay = (kept: InboxDelivery): Promise<void> => {
      replayed.push(kept);
      return Promise.resolve();
    };
    await live.keeper.drainOnce(replay);
    expect(replayed).toEqual([]);
    clock.advance(LEASE + 1);
    await live.keeper.drainOnce(replay);
    await live.tracker.idle();
    expect(replayed).toHaveLength(1);
    expect(replayed[0]).toMatchObject({ deliveryId: "d-1", name: "issue_comment", attempts: 2 });
    expect(JSON.parse(replayed[0]?.payload ?? "")).toEqual(delivery("d-1").payload);
    // Done once: no second replay, however long after.
    clock.advance(10 * LEASE);
    await live.keeper.drainOnce(replay);
    expect(replayed).toHaveLength(1);
    expect(live.log.lines.some((line) => line.level === "warn" && line.msg.includes("working again"))).toBe(true);
  });

  test("a live process renews its holds: a long acknowledgement is not taken from it", async () => {
    const { clock, process } = world();
    const slow = process("web-1");
    const other = process("web-2");
    await slow.keeper.keep(delivery("d-1"), forever);
    const replayed: string[] = [];
    for (let step = 0; step < 5; step++) {
      clock.advance(LEASE / 2);
      await slow.keeper.renewOnce();
      await other.keeper.drainOnce((kept) => {
        replayed.push(kept.key);
        return Promise.resolve();
      });
    }
    expect(replayed).toEqual([]);
  });

  test("a delivery no process can finish is given up after three attempts, and said so", async () => {
    const { clock, process } = world();
    await process("web-1").keeper.keep(delivery("d-1"), forever);
    const attempts: number[] = [];
    const crashing = process("web-2");
    for (let round = 0; round < 2; round++) {
      clock.advance(LEASE + 1);
      // Each replay "dies" too: it never ends, and its process never renews.
      await process(`web-${String(round + 3)}`).keeper.drainOnce((kept) => {
        attempts.push(kept.attempts);
        return forever();
      });
    }
    clock.advance(LEASE + 1);
    await crashing.keeper.drainOnce(() => {
      attempts.push(-1);
      return Promise.resolve();
    });
    expect(attempts).toEqual([2, 3]);
    expect(crashing.log.lines.some((line) => line.level === "error" && line.msg.includes("gave up"))).toBe(true);
  });

  test("replays at once are bounded per process; the rest wait for room", async () => {
    const { clock, process } = world();
    const dead = process("web-1");
    for (const id of ["d-1", "d-2", "d-3"]) await dead.keeper.keep(delivery(id), forever);
    clock.advance(LEASE + 1);
    const live = process("web-2");
    const started: string[] = [];
    const finishers: Array<() => void> = [];
    const replay = (kept: InboxDelivery): Promise<void> => {
      started.push(kept.deliveryId);
      return new Promise<void>((resolve) => finishers.push(resolve));
    };
    await live.keeper.drainOnce(replay);
    await live.keeper.drainOnce(replay);
    expect(started).toEqual(["d-1", "d-2"]);
    finishers.shift()?.();
    await new Promise<void>((resolve) => setImmediate(resolve));
    await live.keeper.drainOnce(replay);
    expect(started).toEqual(["d-1", "d-2", "d-3"]);
    for (const finish of finishers) finish();
    await live.tracker.idle();
  });

  test("a store that cannot keep costs the second chance, not the request", async () => {
    const broken = new MemoryWebhookInbox();
    broken.keep = () => Promise.reject(new Error("READONLY You can't write against a read only replica."));
    const { process } = world(broken);
    const web = process("web-1");
    let worked = false;
    await web.keeper.keep(delivery("d-1"), () => {
      worked = true;
      return Promise.resolve();
    });
    await web.tracker.idle();
    expect(worked).toBe(true);
    expect(web.log.lines.some((line) => line.level === "warn" && line.msg.includes("without a second chance"))).toBe(
      true,
    );
  });

  test("a payload over the inbox's limit is worked without being kept", async () => {
    const { inbox, clock, process } = world();
    const web = process("web-1");
    const huge = { ...delivery("d-big"), payload: { body: "x".repeat(MAX_INBOX_PAYLOAD_BYTES) } };
    let worked = false;
    await web.keeper.keep(huge, () => {
      worked = true;
      return forever();
    });
    expect(worked).toBe(true);
    expect(await inbox.claim("probe", clock.now() + 10 * LEASE, clock.now() + 11 * LEASE, 10)).toEqual([]);
  });

  test("a failed acknowledgement is tried again once its hold lapses; a third failure is reported", async () => {
    const { inbox, clock, process } = world();
    const web = process("web-1");
    const failing = (): Promise<void> => Promise.reject(new Error("GitHub API 502: Bad Gateway"));
    await web.keeper.keep(delivery("d-1"), failing);
    await web.tracker.idle();
    expect(web.failures).toEqual([]);
    const tries: number[] = [];
    for (let round = 0; round < 3; round++) {
      clock.advance(LEASE + 1);
      await web.keeper.drainOnce((kept) => {
        tries.push(kept.attempts);
        return failing();
      });
      await web.tracker.idle();
    }
    expect(tries).toEqual([2, 3]);
    expect(web.failures).toHaveLength(1);
    expect(await inbox.claim("probe", clock.now() + 10 * LEASE, clock.now() + 11 * LEASE, 10)).toEqual([]);
  });

  test("progress: what a first working noted is what a second reads; a broken store reads as none", async () => {
    const { inbox, process } = world();
    const web = process("web-1");
    await web.keeper.progress.note("comment:42", { runId: "run-a", statusCommentId: 9 });
    expect(await web.keeper.progress.of("comment:42")).toEqual({ runId: "run-a", statusCommentId: 9 });
    inbox.progressOf = () => Promise.reject(new Error("connection lost"));
    expect(await web.keeper.progress.of("comment:42")).toBeUndefined();
  });
});
