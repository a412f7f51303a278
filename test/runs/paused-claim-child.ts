/**
 * Another process claiming paused runs in one store, for the cross-process test: once the store
 * is open it says it is ready and waits for the go (so every process races from the same moment,
 * not from when each finished starting), then claims `run-0` … `run-<count - 1>` as `by` and
 * reports the ids it won.
 */
import { RedisPausedRunStore } from "../../src/runs/paused/redis.js";
import { SqlitePausedRunStore } from "../../src/runs/paused/sqlite.js";

const [kind = "", location = "", prefix = "", by = "", count = "0"] = process.argv.slice(2);
const store =
  kind === "redis"
    ? new RedisPausedRunStore({ redis: location, prefix })
    : new SqlitePausedRunStore({ path: location });
try {
  await new Promise((resolve) => {
    process.once("message", resolve);
    process.send?.({ ready: true });
  });
  const won: string[] = [];
  for (let run = 0; run < Number(count); run++) {
    const runId = `run-${String(run)}`;
    if (await store.claim(runId, { state: "ending", by })) won.push(runId);
  }
  process.send?.({ won });
} catch (error) {
  process.send?.({ error: error instanceof Error ? error.message : String(error) });
} finally {
  await store.close();
  process.disconnect();
}
