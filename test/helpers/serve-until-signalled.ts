import type { HarnessServer } from "../../src/server.js";

/**
 * A test's own app entry after start-up, as `npm start` behaves: the line the tests wait for, then
 * SIGTERM or SIGINT closes the server (draining what it holds) and exits 0, or 1 if closing failed.
 */
export function serveUntilSignalled(server: Pick<HarnessServer, "url" | "close">): void {
  process.stderr.write(`Harness is listening on ${server.url}\n`);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
