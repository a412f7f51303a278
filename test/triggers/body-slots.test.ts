import { describe, expect, test } from "vitest";
import { createBodySlots } from "../../src/triggers/body-slots.js";

/** Resolves to the order in which the tickets' `ready` settled, after pending callbacks ran. */
async function settledOrder(tickets: { ready: Promise<void> }[]): Promise<number[]> {
  const order: number[] = [];
  tickets.forEach((ticket, index) => {
    void ticket.ready.then(() => order.push(index));
  });
  await new Promise((resolve) => setImmediate(resolve));
  return order;
}

describe("body slots", () => {
  test("no more than the slots are held at once; the others wait, first come first served", async () => {
    const slots = createBodySlots(2, 10);
    const tickets = [0, 1, 2, 3].map(() => slots.acquire());
    const [a, b, c, d] = tickets;
    if (!a || !b || !c || !d) throw new Error("a ticket was refused");
    expect(await settledOrder(tickets as { ready: Promise<void> }[])).toEqual([0, 1]);
    expect(slots.state()).toEqual({ reading: 2, waiting: 2 });

    const later = settledOrder([c, d]);
    a.release();
    expect(await later).toEqual([0]);
    expect(slots.state()).toEqual({ reading: 2, waiting: 1 });
    b.release();
    c.release();
    d.release();
    expect(slots.state()).toEqual({ reading: 0, waiting: 0 });
  });

  test("the line is bounded: past it a ticket is refused, and a place is free again once one leaves", () => {
    const slots = createBodySlots(1, 2);
    const holder = slots.acquire();
    const first = slots.acquire();
    const second = slots.acquire();
    expect(holder && first && second).toBeTruthy();
    expect(slots.acquire()).toBeUndefined();
    first?.release();
    expect(slots.state()).toEqual({ reading: 1, waiting: 1 });
    expect(slots.acquire()).toBeDefined();
  });

  test("a waiting ticket that gives up never gets the slot, and releasing twice gives back one slot", async () => {
    const slots = createBodySlots(1, 5);
    const holder = slots.acquire();
    const quitter = slots.acquire();
    const next = slots.acquire();
    if (!holder || !quitter || !next) throw new Error("a ticket was refused");
    quitter.release();
    const order = settledOrder([quitter, next]);
    holder.release();
    holder.release();
    expect(await order).toEqual([1]);
    expect(slots.state()).toEqual({ reading: 1, waiting: 0 });
  });
});
