import { isAbsolute } from "node:path";
import { InvalidInputError } from "../../util/errors.js";

/**
 * The sandbox half of egress: inside a network namespace that has only loopback, a small Node
 * program listens on 127.0.0.1:<port> and relays every connection to the egress proxy's Unix
 * socket, then runs the command with the proxy variables that curl, git, npm, pip and most
 * agents honour. It enforces nothing: the command could kill it or bypass it and would still
 * reach only the proxy's socket, which is where the policy lives.
 */

/** Squid's port: some tools recognise it, and inside the sandbox's own namespace it is always free. */
export const PROXY_PORT = 3128;

/** The variables that send a command's HTTP(S) clients through the egress proxy. */
const PROXY_URL_NAMES = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"] as const;
/** Loopback is never proxied: the sandbox's own relays (the model gateway) live there. */
const NO_PROXY = "localhost,127.0.0.1,::1";

/**
 * The environment that points a command at the egress proxy at `proxyUrl`: what the forwarder
 * gives the command it starts, and what a sandbox gives commands it starts some other way.
 */
export function proxyEnvironment(proxyUrl: string): Record<string, string> {
  return {
    ...Object.fromEntries(PROXY_URL_NAMES.map((name) => [name, proxyUrl])),
    NO_PROXY,
    no_proxy: NO_PROXY,
  };
}

/** Exit code when the forwarder itself cannot start (bad arguments, the port is taken). */
export const EXIT_FORWARDER_FAILED = 125;

/**
 * The argv to put after bwrap's `--`: node running the forwarder (written to `forwarderPath` from
 * FORWARDER_SOURCE, and bound read-only into the sandbox together with `socketPath`'s directory),
 * which runs `argv`.
 *
 * `nodePath` defaults to the harness's own node, which the forwarder is tested with; it must be
 * visible inside the sandbox (anything under /usr is; a node elsewhere needs its directory in
 * readOnlyPaths).
 */
export function egressCommand(
  forwarderPath: string,
  socketPath: string,
  argv: readonly string[],
  port = PROXY_PORT,
  nodePath = process.execPath,
): string[] {
  return forwarderCommand({ forwarderPath, proxy: { socketPath, port }, argv, nodePath });
}

/** Where the model gateway listens inside a sandbox whose network has only loopback. */
export const GATEWAY_PORT = 3129;

/** A TCP port inside the sandbox relayed, unchanged, to a Unix socket on the host. */
export interface Relay {
  port: number;
  socketPath: string;
}

/**
 * The forwarder's argv in general: the egress proxy (whose address the command's proxy
 * variables name) and/or plain relays, such as the model gateway's, which the command reaches
 * at `http://127.0.0.1:<port>` directly (loopback is never proxied).
 */
export function forwarderCommand(options: {
  forwarderPath: string;
  proxy?: Relay;
  relays?: readonly Relay[];
  argv: readonly string[];
  nodePath?: string;
}): string[] {
  const { forwarderPath, proxy, relays = [], argv } = options;
  const nodePath = options.nodePath ?? process.execPath;
  if (argv.length === 0) throw new InvalidInputError("egressCommand needs a command to run");
  for (const [name, path] of [
    ["forwarderPath", forwarderPath],
    ["socketPath", proxy?.socketPath ?? "/"],
    ["nodePath", nodePath],
    ...relays.map((relay) => ["socketPath", relay.socketPath] as const),
  ] as const) {
    // A relative path would be resolved against the command's working directory: the checkout.
    if (!isAbsolute(path) || path.includes("\0"))
      throw new InvalidInputError(`egressCommand: ${name} must be an absolute path, got "${path}"`);
  }
  for (const port of [proxy?.port ?? PROXY_PORT, ...relays.map((relay) => relay.port)])
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new InvalidInputError(`egressCommand: ${String(port)} is not a TCP port (1-65535)`);
  return [
    nodePath,
    forwarderPath,
    proxy?.socketPath ?? "-",
    proxy ? String(proxy.port) : "-",
    ...relays.flatMap((relay) => ["--relay", `${String(relay.port)}=${relay.socketPath}`]),
    "--",
    ...argv,
  ];
}

/**
 * Run as `node <file> <unix-socket-path> <listen-port> -- <command> [args…]`. Self-contained
 * (node: builtins only, no TypeScript) because it runs inside the sandbox, where the harness's
 * modules are not visible. Exit codes follow runProcess and the shell: the command's own, 128+n
 * when a signal killed it, 127/126 when it cannot be started, 125 when the forwarder cannot.
 */
export const FORWARDER_SOURCE = `// Harness egress forwarder: relays 127.0.0.1:<port> to the egress proxy's Unix socket.
import { spawn } from "node:child_process";
import { connect, createServer } from "node:net";
import { constants } from "node:os";

const PREFIX = "harness egress forwarder: ";

function fail(message) {
  process.stderr.write(PREFIX + message + "\\n");
  process.exit(${EXIT_FORWARDER_FAILED});
}

const args = process.argv.slice(2);
const [socketPath, portText] = args;
const relays = [];
let at = 2;
while (args[at] === "--relay") {
  const spec = args[at + 1] || "";
  const equals = spec.indexOf("=");
  relays.push({ port: Number(spec.slice(0, equals)), socketPath: spec.slice(equals + 1) });
  at += 2;
}
const separator = args[at];
const command = args.slice(at + 1);
if (!socketPath || !portText || separator !== "--" || command.length === 0) {
  fail(
    "usage: node forwarder.mjs <unix-socket-path|-> <listen-port|-> [--relay <port>=<socket>]... " +
      "-- <command> [args...]",
  );
}
const proxied = socketPath !== "-";
const port = proxied ? Number(portText) : 0;
if (proxied && (!Number.isInteger(port) || port < 1 || port > 65535)) fail("not a TCP port: " + portText);
for (const relay of relays) {
  if (!Number.isInteger(relay.port) || relay.port < 1 || relay.port > 65535 || !relay.socketPath)
    fail("not a relay: " + relay.port + "=" + relay.socketPath);
}

let warned = false;
function relayTo(target) {
  return createServer({ allowHalfOpen: true }, (client) => {
    const upstream = connect({ path: target, allowHalfOpen: true });
    const destroyBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", destroyBoth);
    upstream.on("error", (error) => {
      // Once is enough to explain every failed request that follows.
      if (!warned) {
        warned = true;
        process.stderr.write(PREFIX + "cannot reach " + target + " (" + (error.code || error.message) + ")\\n");
      }
      destroyBoth();
    });
    // One side gone for good: let the other flush what it holds, then finish.
    client.on("close", () => {
      if (!upstream.writableEnded) upstream.end();
    });
    upstream.on("close", () => {
      if (!client.writableEnded) client.end();
    });
    client.pipe(upstream);
    upstream.pipe(client);
  });
}

function listen(server, listenPort) {
  return new Promise((resolve) => {
    server.on("error", (error) => {
      if (error.code === "EADDRINUSE")
        fail("127.0.0.1:" + listenPort + " is already in use inside the sandbox; choose another port");
      fail("cannot listen on 127.0.0.1:" + listenPort + ": " + error.message);
    });
    server.listen({ host: "127.0.0.1", port: listenPort, exclusive: true }, resolve);
  });
}

const listening = [
  ...(proxied ? [listen(relayTo(socketPath), port)] : []),
  ...relays.map((relay) => listen(relayTo(relay.socketPath), relay.port)),
];
Promise.all(listening).then(() => {
  const proxyUrl = "http://127.0.0.1:" + port;
  const noProxy = ${JSON.stringify(NO_PROXY)};
  const env = proxied
    ? {
        ...process.env,
        ...Object.fromEntries(${JSON.stringify(PROXY_URL_NAMES)}.map((name) => [name, proxyUrl])),
        NO_PROXY: noProxy,
        no_proxy: noProxy,
      }
    : process.env;
  const child = spawn(command[0], command.slice(1), { stdio: "inherit", env });
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
    process.on(signal, () => {
      child.kill(signal);
    });
  }
  child.on("error", (error) => {
    const code = error.code === "ENOENT" ? 127 : error.code === "EACCES" ? 126 : ${EXIT_FORWARDER_FAILED};
    process.stderr.write(PREFIX + "cannot run " + command[0] + ": " + error.message + "\\n");
    process.exit(code);
  });
  child.on("exit", (code, signal) => {
    process.exit(code ?? 128 + (signal ? constants.signals[signal] : 0));
  });
});
`;
