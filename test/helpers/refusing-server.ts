/**
 * A child process for tests: an HTTP server on 127.0.0.1 that refuses every request 404 at once,
 * body unread, through the lingering close (`argv[2]`: its options as JSON). It sends its port
 * to the parent over IPC. Out of the test's process, so that the client and the server do not
 * take turns on one event loop, which would hide how a closing server races a writing client.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createLingeringClose } from "../../src/triggers/lingering-close.js";

const closer = createLingeringClose(JSON.parse(process.argv[2] ?? "{}") as object);
const server = createServer((req, res) => {
  closer.refuse(req, res, 404, { "content-type": "text/plain" }, "Not found\n");
});
server.listen(0, "127.0.0.1", () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
process.on("disconnect", () => {
  process.exit(0);
});
