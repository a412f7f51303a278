/**
 * A worker process for the owner-lock test: takes a lock in the directory it is given, reports
 * the lock's name, and lives until it is killed.
 */
import { OwnerLock } from "../../src/runs/queue/owner-lock.js";

const lock = OwnerLock.acquire(process.argv[2] ?? "");
process.send?.({ name: lock?.name ?? null });
setInterval(() => undefined, 60_000);
