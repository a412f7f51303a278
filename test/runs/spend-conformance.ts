import { afterEach, describe, expect, test } from "vitest";
import type { SpendStore } from "../../src/runs/spend/port.js";

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
