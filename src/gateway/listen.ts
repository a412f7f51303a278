import { chmod, mkdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { ModelGateway } from "./model-gateway.js";

/** The gateway's own listeners on this host. */
export interface GatewayListeners {
  /** `http://127.0.0.1:<port>`: for sandboxes that share the host's network (and worktree mode). */
  url: string;
  /** Its Unix socket: relayed into isolated sandboxes whose network has only loopback. */
  socketPath: string;
  close(): Promise<void>;
}

/**
 * Serves the gateway on 127.0.0.1 (a free port) and on a Unix socket in `socketDir`. Both only
 * ever answer a caller holding a live run token; the socket is open to the sandbox's user for
 * that reason, as the loopback port is to every local process.
 */
export async function listenGateway(gateway: ModelGateway, socketDir: string): Promise<GatewayListeners> {
  const handler = gateway.handle.bind(gateway);
  const tcp = createServer(handler);
  const unix = createServer(handler);
  for (const server of [tcp, unix]) {
    // Codex tries a WebSocket first and falls back to HTTP when refused at once.
    server.on("upgrade", (_request, socket) => {
      socket.end("HTTP/1.1 426 Upgrade Required\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    });
    // A request (not its answer, which may stream for minutes) must arrive whole within these.
    server.headersTimeout = 60_000;
    server.requestTimeout = 120_000;
    server.keepAliveTimeout = 65_000;
  }
  await mkdir(socketDir, { recursive: true, mode: 0o711 });
  await chmod(socketDir, 0o711);
  const socketPath = join(socketDir, "gateway.sock");
  await rm(socketPath, { force: true });
  await listen(unix, { path: socketPath });
  await chmod(socketPath, 0o666);
  await listen(tcp, { host: "127.0.0.1", port: 0 });
  const port = (tcp.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    socketPath,
    async close() {
      await Promise.all([close(tcp), close(unix)]);
      await rm(socketPath, { force: true });
    },
  };
}

function listen(server: Server, options: { path: string } | { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
  });
}
