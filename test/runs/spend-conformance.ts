import { afterEach, describe, expect, test } from "vitest";
import type { ReserveRequest, SpendStore } from "../../src/runs/spend/port.js";

/** A spend store under test; `another` opens a second handle on the same store, as another process would. */
export interface SpendHarness {
  store: SpendStore;
  another: () => Promise<SpendStore>;
  dispose: () => Promise<void>;
}

const WIDGETS = { repoId: 101, installationId: 7 };
const GADGETS = { repoId: 202, installationId: 7 };
const ELSEWHERE = { repoId: 303, installationId: 8 };
const MORNING = new Date("2026-11-22T09:00:00.000Z");
const EVENING = new Date("2026-11-22T23:59:59.999Z");
const NEXT_DAY = new Date("2026-11-23T00:00:00.000Z");

/** One model call's reservation for run-1 in acme/widgets, at 09:00, for ten minutes, with no limits unless given. */
function reservation(reservationId: string, overrides: Partial<ReserveRequest> = {}): ReserveRequest {
  return {
    reservationId,
    runId: "run-1",
    scope: WIDGETS,
    amountUsd: 0.1,
    limits: {},
    at: MORNING,
    ttlMs: 600_000,
    ...overrides,
  };
}

function later(ms: number): Date {
  return new Date(MORNING.getTime() + ms);
}

/** The behaviour every spend store must show. `durable` stores also keep their totals when opened again. */
export function describeSpendStoreConformance(
  name: string,
  factory: () => Promise<SpendHarness>,
  { durable = true }: { durable?: boolean } = {},
): void {
  describe(`${name} spend store`, () => {
    const disposers: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });
    async function open(): Promise<SpendHarness> {
      const harness = await factory();
      disposers.push(harness.dispose);
      return harness;
    }

    test("nothing spent reads as zero for the repository and its installation", async () => {
      const { store } = await open();
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0, installation: 0 });
    });

    test("a run's cost counts for its repository and its installation, each repository apart", async () => {
      const { store } = await open();
      await store.add("run-1", WIDGETS, 1.25, MORNING);
      await store.add("run-2", GADGETS, 2.5, MORNING);
      await store.add("run-3", ELSEWHERE, 4, MORNING);
      expect(await store.spentToday(WIDGETS, EVENING)).toEqual({ repository: 1.25, installation: 3.75 });
      expect(await store.spentToday(GADGETS, MORNING)).toEqual({ repository: 2.5, installation: 3.75 });
      expect(await store.spentToday(ELSEWHERE, MORNING)).toEqual({ repository: 4, installation: 4 });
    });

    test("cents add up exactly, without float drift", async () => {
      const { store } = await open();
      for (let run = 0; run < 10; run++) await store.add(`run-${String(run)}`, WIDGETS, 0.1, MORNING);
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 1, installation: 1 });
    });

    test("a run reported twice (retried after a crash) counts once", async () => {
      const { store } = await open();
      await store.add("run-1", WIDGETS, 3, MORNING);
      await store.add("run-1", WIDGETS, 3, EVENING);
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 3, installation: 3 });
    });

    test("a run reported from two processes at once counts once, and no other run is lost", async () => {
      const { store, another } = await open();
      const second = await another();
      await Promise.all([
        ...Array.from({ length: 20 }, (_, index) =>
          (index % 2 === 0 ? store : second).add(`run-${String(index % 10)}`, WIDGETS, 0.5, MORNING),
        ),
      ]);
      expect(await second.spentToday(WIDGETS, MORNING)).toEqual({ repository: 5, installation: 5 });
    });

    test("each UTC day starts at zero; yesterday's runs stay counted once", async () => {
      const { store } = await open();
      await store.add("run-1", WIDGETS, 6, EVENING);
      expect(await store.spentToday(WIDGETS, NEXT_DAY)).toEqual({ repository: 0, installation: 0 });
      await store.add("run-1", WIDGETS, 6, NEXT_DAY);
      expect(await store.spentToday(WIDGETS, NEXT_DAY)).toEqual({ repository: 0, installation: 0 });
      await store.add("run-2", WIDGETS, 1, NEXT_DAY);
      expect(await store.spentToday(WIDGETS, NEXT_DAY)).toEqual({ repository: 1, installation: 1 });
      expect(await store.spentToday(WIDGETS, EVENING)).toEqual({ repository: 6, installation: 6 });
    });

    test("a spend that is no amount is refused", async () => {
      const { store } = await open();
      await expect(store.add("run-1", WIDGETS, Number.NaN, MORNING)).rejects.toThrow(/non-negative amount/);
      await expect(store.add("run-2", WIDGETS, -1, MORNING)).rejects.toThrow(/non-negative amount/);
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0, installation: 0 });
    });

    test("a reservation within every limit is granted and held for its run, not yet spent", async () => {
      const { store } = await open();
      const result = await store.reserve(
        reservation("call-1", {
          amountUsd: 0.4,
          limits: { runUsd: 1, repositoryDailyUsd: 2, installationDailyUsd: 3 },
        }),
      );
      expect(result).toEqual({ granted: true });
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0, reservedUsd: 0.4 });
      expect(await store.runSpend("run-2", MORNING)).toEqual({ spentUsd: 0, reservedUsd: 0 });
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0, installation: 0 });
    });

    test("a reservation over any one limit is refused, naming it and what is spent and held on it", async () => {
      const { store } = await open();
      await store.reserve(reservation("call-1", { amountUsd: 0.5 }));
      await store.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.3, at: MORNING });
      await store.reserve(reservation("call-2", { amountUsd: 0.4 }));

      expect(await store.reserve(reservation("call-3", { amountUsd: 0.5, limits: { runUsd: 1 } }))).toEqual({
        granted: false,
        limit: "run",
        limitUsd: 1,
        committedUsd: 0.7,
      });
      expect(
        await store.reserve(
          reservation("call-4", { runId: "run-2", amountUsd: 0.5, limits: { runUsd: 1, repositoryDailyUsd: 1 } }),
        ),
      ).toEqual({ granted: false, limit: "repository", limitUsd: 1, committedUsd: 0.7 });
      expect(
        await store.reserve(
          reservation("call-5", {
            runId: "run-3",
            scope: GADGETS,
            amountUsd: 0.5,
            limits: { repositoryDailyUsd: 1, installationDailyUsd: 1.1 },
          }),
        ),
      ).toEqual({ granted: false, limit: "installation", limitUsd: 1.1, committedUsd: 0.7 });
      // Refusals hold nothing; an amount that exactly fills the limit fits.
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0.3, reservedUsd: 0.4 });
      expect(
        await store.reserve(
          reservation("call-6", { runId: "run-2", amountUsd: 0.3, limits: { repositoryDailyUsd: 1 } }),
        ),
      ).toEqual({ granted: true });
    });

    test("finished runs' added costs count against the daily limits", async () => {
      const { store } = await open();
      await store.add("finished-run", ELSEWHERE, 2, MORNING);
      expect(
        await store.reserve(
          reservation("call-1", { scope: ELSEWHERE, amountUsd: 1, limits: { installationDailyUsd: 2.5 } }),
        ),
      ).toEqual({ granted: false, limit: "installation", limitUsd: 2.5, committedUsd: 2 });
    });

    test("the same reservation id reserved twice is one reservation", async () => {
      const { store, another } = await open();
      const second = await another();
      const call = reservation("call-1", { amountUsd: 0.6, limits: { repositoryDailyUsd: 1 } });
      expect(await store.reserve(call)).toEqual({ granted: true });
      expect(await second.reserve(call)).toEqual({ granted: true });
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0, reservedUsd: 0.6 });
    });

    test("settling counts the real cost for the run, repository and installation, frees the hold, once", async () => {
      const { store, another } = await open();
      await store.reserve(reservation("call-1", { amountUsd: 0.5 }));
      await store.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.2, at: MORNING });
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0.2, reservedUsd: 0 });
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0.2, installation: 0.2 });

      const second = await another();
      await second.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.2, at: MORNING });
      await store.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.2, at: EVENING });
      expect(await store.reserve(reservation("call-1", { amountUsd: 0.5 }))).toEqual({ granted: true });
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0.2, reservedUsd: 0 });
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0.2, installation: 0.2 });
      expect(await store.spentToday(GADGETS, MORNING)).toEqual({ repository: 0, installation: 0.2 });
    });

    test("a call settled after midnight counts on its reservation's day", async () => {
      const { store } = await open();
      await store.reserve(reservation("call-1", { amountUsd: 0.5, at: EVENING }));
      await store.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.4, at: NEXT_DAY });
      expect(await store.spentToday(WIDGETS, EVENING)).toEqual({ repository: 0.4, installation: 0.4 });
      expect(await store.spentToday(WIDGETS, NEXT_DAY)).toEqual({ repository: 0, installation: 0 });
      expect(await store.runSpend("run-1", NEXT_DAY)).toEqual({ spentUsd: 0.4, reservedUsd: 0 });
    });

    test("releasing frees the hold and spends nothing", async () => {
      const { store, another } = await open();
      const limits = { repositoryDailyUsd: 1 };
      await store.reserve(reservation("call-1", { amountUsd: 0.8, limits }));
      expect(await store.reserve(reservation("call-2", { amountUsd: 0.8, limits }))).toMatchObject({ granted: false });
      await (await another()).release("call-1");
      await store.release("call-1");
      await store.release("never-reserved");
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0, reservedUsd: 0 });
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0, installation: 0 });
      expect(await store.reserve(reservation("call-2", { amountUsd: 0.8, limits }))).toEqual({ granted: true });
    });

    test("a reservation past its ttl stops counting", async () => {
      const { store } = await open();
      const limits = { repositoryDailyUsd: 1 };
      await store.reserve(reservation("call-1", { amountUsd: 0.8, limits, ttlMs: 60_000 }));
      expect(
        await store.reserve(reservation("call-2", { runId: "run-2", amountUsd: 0.5, limits, at: later(59_999) })),
      ).toEqual({ granted: false, limit: "repository", limitUsd: 1, committedUsd: 0.8 });
      expect(await store.runSpend("run-1", later(59_999))).toEqual({ spentUsd: 0, reservedUsd: 0.8 });
      expect(await store.runSpend("run-1", later(60_000))).toEqual({ spentUsd: 0, reservedUsd: 0 });
      expect(
        await store.reserve(reservation("call-3", { runId: "run-2", amountUsd: 0.5, limits, at: later(60_000) })),
      ).toEqual({ granted: true });
      // The same id after its expiry is held again, from then.
      expect(await store.reserve(reservation("call-1", { amountUsd: 0.5, limits, at: later(61_000) }))).toEqual({
        granted: true,
      });
      expect(await store.runSpend("run-1", later(61_000))).toEqual({ spentUsd: 0, reservedUsd: 0.5 });
    });

    test("the cost of a call whose reservation expired, was released or never was still counts", async () => {
      const { store } = await open();
      await store.reserve(reservation("call-1", { amountUsd: 0.8, ttlMs: 60_000 }));
      // Another call after the expiry, which lets the stores that clean up lazily do so.
      await store.reserve(reservation("call-2", { amountUsd: 0.1, limits: { runUsd: 1 }, at: later(120_000) }));
      await store.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.7, at: later(180_000) });
      await store.reserve(reservation("call-3", { amountUsd: 0.1 }));
      await store.release("call-3");
      await store.settle("call-3", { runId: "run-1", scope: WIDGETS, usd: 0.05, at: later(180_000) });
      await store.settle("never-reserved", { runId: "run-2", scope: WIDGETS, usd: 0.25, at: later(180_000) });
      expect(await store.spentToday(WIDGETS, MORNING)).toEqual({ repository: 1, installation: 1 });
      expect(await store.runSpend("run-1", later(180_000))).toEqual({ spentUsd: 0.75, reservedUsd: 0.1 });
      expect(await store.runSpend("run-2", later(180_000))).toEqual({ spentUsd: 0.25, reservedUsd: 0 });
    });

    test("four runs racing from two processes never commit more than the daily budget", async () => {
      const { store, another } = await open();
      const second = await another();
      const handles = [store, second];
      const calls = Array.from({ length: 4 * 12 }, (_, index) => ({
        handle: handles[index % 2] ?? store,
        runId: `run-${String(index % 4)}`,
        reservationId: `call-${String(index)}`,
      }));
      const granted = await Promise.all(
        calls.map(async ({ handle, runId, reservationId }) => {
          const result = await handle.reserve(
            reservation(reservationId, {
              runId,
              amountUsd: 0.07,
              limits: { runUsd: 1, repositoryDailyUsd: 1, installationDailyUsd: 1 },
            }),
          );
          if (result.granted) await handle.settle(reservationId, { runId, scope: WIDGETS, usd: 0.07, at: MORNING });
          return result.granted;
        }),
      );
      // $1 holds 14 calls of $0.07: no fewer (nothing refused that fitted) and no more.
      expect(granted.filter(Boolean)).toHaveLength(14);
      expect(await second.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0.98, installation: 0.98 });
    });

    test("a reservation that is no amount, no time or no id is refused with what is wrong", async () => {
      const { store } = await open();
      await expect(store.reserve(reservation("call-1", { amountUsd: 0 }))).rejects.toThrow(/positive amount/);
      await expect(store.reserve(reservation("call-1", { amountUsd: Number.NaN }))).rejects.toThrow(/non-negative/);
      await expect(store.reserve(reservation("call-1", { ttlMs: 0 }))).rejects.toThrow(/ttl must be/);
      await expect(store.reserve(reservation("call-1", { ttlMs: 2 * 86_400_000 }))).rejects.toThrow(/ttl must be/);
      await expect(store.reserve(reservation("call-1", { limits: { repositoryDailyUsd: -1 } }))).rejects.toThrow(
        /repository budget must be a non-negative amount/,
      );
      await expect(store.reserve(reservation("call-1", { at: new Date(Number.NaN) }))).rejects.toThrow(/valid date/);
      await expect(store.reserve(reservation(""))).rejects.toThrow(/reservation id must be 1 to 200 characters/);
      await expect(store.reserve(reservation("x".repeat(201)))).rejects.toThrow(/reservation id/);
      await expect(store.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: -0.5, at: MORNING })).rejects.toThrow(
        /non-negative amount/,
      );
      expect(await store.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0, reservedUsd: 0 });
    });

    if (durable)
      test("reservations and settled costs survive closing and opening again", async () => {
        const { store, another } = await open();
        await store.reserve(reservation("call-0", { amountUsd: 0.2 }));
        await store.settle("call-0", { runId: "run-1", scope: WIDGETS, usd: 0.2, at: MORNING });
        await store.reserve(reservation("call-1", { amountUsd: 0.6 }));
        await store.close();
        const reopened = await another();
        expect(await reopened.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0.2, reservedUsd: 0.6 });
        expect(
          await reopened.reserve(
            reservation("call-2", { runId: "run-2", amountUsd: 0.3, limits: { repositoryDailyUsd: 1 } }),
          ),
        ).toEqual({ granted: false, limit: "repository", limitUsd: 1, committedUsd: 0.8 });
        await reopened.settle("call-0", { runId: "run-1", scope: WIDGETS, usd: 0.2, at: MORNING });
        await reopened.settle("call-1", { runId: "run-1", scope: WIDGETS, usd: 0.5, at: MORNING });
        expect(await reopened.runSpend("run-1", MORNING)).toEqual({ spentUsd: 0.7, reservedUsd: 0 });
        expect(await reopened.spentToday(WIDGETS, MORNING)).toEqual({ repository: 0.7, installation: 0.7 });
      });

    if (durable)
      test("the totals survive closing and opening again", async () => {
        const { store, another } = await open();
        await store.add("run-1", WIDGETS, 2, MORNING);
        await store.close();
        const reopened = await another();
        expect(await reopened.spentToday(WIDGETS, MORNING)).toEqual({ repository: 2, installation: 2 });
        await reopened.add("run-1", WIDGETS, 2, MORNING);
        expect(await reopened.spentToday(WIDGETS, MORNING)).toEqual({ repository: 2, installation: 2 });
      });
  });
}
