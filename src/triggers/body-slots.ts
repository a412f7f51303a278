/** A place in the line for reading a body: `ready` once it may read; `release` when done or given up. */
export interface SlotTicket {
  readonly ready: Promise<void>;
  /** Gives the slot back, or leaves the line if it was still waiting; idempotent. */
  release(): void;
}

/**
 * So many slots, first come first served, with a bounded line of those waiting for one.
 * `acquire` returns undefined when every slot is taken and the line is full.
 */
export function createBodySlots(size: number, maxWaiting: number) {
  let inUse = 0;
  const line: (() => void)[] = [];

  const grantNext = (): void => {
    while (inUse < size) {
      const grant = line.shift();
      if (grant === undefined) return;
      inUse++;
      grant();
    }
  };

  return {
    acquire(): SlotTicket | undefined {
      if (inUse >= size && line.length >= maxWaiting) return undefined;
      let state: "waiting" | "holding" | "released" = "waiting";
      let grant = (): void => undefined;
      const ready = new Promise<void>((resolve) => {
        grant = () => {
          state = "holding";
          resolve();
        };
      });
      if (inUse < size) {
        inUse++;
        grant();
      } else line.push(grant);
      return {
        ready,
        release() {
          if (state === "holding") {
            inUse--;
            grantNext();
          } else if (state === "waiting") line.splice(line.indexOf(grant), 1);
          state = "released";
        },
      };
    },
    /** Slots taken and tickets waiting, now. */
    state: (): { reading: number; waiting: number } => ({ reading: inUse, waiting: line.length }),
  };
}
