/**
 * Another process reserving model calls against one spend store, for the cross-process test:
 * once the store is open it says it is ready and waits for the go (so every process races from
 * the same moment, not from when each finished starting), then reserves `count` calls of
 * `amountUsd` for `runId` as fast as it can, settles each one granted at its reserved amount, and
 * reports how many were granted.
 */
import { RedisSpendStore } from "../../src/runs/spend/redis.js";
import { SqliteSpendStore } from "../../src/runs/spend/sqlite.js";

const [kind = "", location = "", prefix = "", runId = "", count = "0", amount = "0", at = ""] = process.argv.slice(2);
const store =
  kind === "redis" ? new RedisSpendStore({ redis: location, prefix }) : new SqliteSpendStore({ path: location });
const scope = { repoId: 101, installationId: 7 };
try {
  await store.runSpend(runId, new Date(at));
  await new Promise((resolve) => {
    process.once("message", resolve);
    process.send?.({ ready: true });
  });
  let granted = 0;
  for (let call = 0; call < Number(count); call++) {
    const reservationId = `${runId}-call-${String(call)}`;
    const result = await store.reserve({
      reservationId,
      runId,
      scope,
      amountUsd: Number(amount),
      limits: { repositoryDailyUsd: 1, installationDailyUsd: 1 },
      at: new Date(at),
      ttlMs: 600_000,
    });
    if (!result.granted) continue;
    granted += 1;
    await store.settle(reservationId, { runId, scope, usd: Number(amount), at: new Date(at) });
  }
  process.send?.({ granted });
} catch (error) {
  process.send?.({ error: error instanceof Error ? error.message : String(error) });
} finally {
  await store.close();
  process.disconnect();
}
