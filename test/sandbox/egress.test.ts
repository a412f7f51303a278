import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { createServer, request, type IncomingHttpHeaders, type RequestListener, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  addressAllowed,
  AllowlistError,
  hostAllowed,
  isInternalAddress,
  parseAllowlist,
  type AllowEntry,
  type EgressAllowlist,
} from "../../src/sandbox/egress/allowlist.js";
import { egressCommand, FORWARDER_SOURCE, PROXY_PORT } from "../../src/sandbox/egress/forwarder.js";
import {
  startEgressProxy,
  type EgressDecision,
  type EgressProxy,
  type EgressProxyOptions,
} from "../../src/sandbox/egress/proxy.js";
import { isolatedCommand, probeIsolation } from "../../src/sandbox/local/isolation.js";
import { giveToSandbox, letSandboxRead, letSandboxTraverse } from "../../src/sandbox/local/sandbox-access.js";
import { sandboxUserFor } from "../../src/sandbox/local/sandbox-user.js";
import { runProcess } from "../../src/sandbox/process.js";

/*
 * The egress allowlist: the pure policy, the host-side proxy spoken to directly over its Unix
 * socket, and the whole path as a sandboxed command uses it (bwrap with no network, the
 * forwarder, the proxy, a site on 127.0.0.1). Nothing here leaves the machine: every "site" is
 * a server this file starts on 127.0.0.1, and names under .test (reserved, RFC 6761) are
 * resolved by the proxy's `resolve` option, never by DNS.
 */

const probe = await probeIsolation();
if (!probe.available) console.warn(`[egress.test] sandboxed egress tests skipped: ${probe.reason}; fix: ${probe.fix}`);
// curl is the client the sandboxed tests speak through, as agents' tools do.
const curlPath = ["/usr/bin/curl", "/bin/curl"].find((path) => existsSync(path));
if (probe.available && !curlPath)
  console.warn("[egress.test] sandboxed egress tests skipped: curl is not installed (apt-get install curl)");

// node outside /usr (nvm, a tarball in /opt) must be made visible for the forwarder to run.
const nodeDir = dirname(process.execPath);
const nodeReadOnly = nodeDir.startsWith("/usr/") ? [] : [nodeDir];

const allow = (...entries: string[]): AllowEntry[] => parseAllowlist(entries).entries;
/** A proxy's allowlist as the operator writes it: trusted with internal addresses such as the test sites'. */
const byOperator = (...entries: string[]): EgressAllowlist => ({ operator: allow(...entries), repository: [] });

describe("parseAllowlist", () => {
  test("reads domains, wildcards, CIDRs and bare IPs into a normal form", () => {
    expect(
      allow(
        "Example.COM",
        "*.github.com",
        "10.1.2.3/8",
        "2001:db8::1/32",
        "192.0.2.7",
        "[2606:4700::1111]",
        "::ffff:192.0.2.0/120",
      ),
    ).toEqual([
      { kind: "domain", name: "example.com", wildcard: false },
      { kind: "domain", name: "github.com", wildcard: true },
      { kind: "cidr", network: "10.0.0.0", prefix: 8, family: 4 },
      { kind: "cidr", network: "2001:db8::", prefix: 32, family: 6 },
      { kind: "cidr", network: "192.0.2.7", prefix: 32, family: 4 },
      { kind: "cidr", network: "2606:4700::1111", prefix: 128, family: 6 },
      { kind: "cidr", network: "::ffff:192.0.2.0", prefix: 120, family: 6 },
    ]);
    // Entries written in Unicode match the punycode form clients send.
    expect(allow("bücher.de")).toEqual([{ kind: "domain", name: "xn--bcher-kva.de", wildcard: false }]);
  });

  test.each([
    ["foo bar", "`foo bar` is neither a domain (example.com, *.example.com) nor a CIDR (10.0.0.0/8) nor an IP"],
    ["https://example.com", "without a scheme"],
    ["example.com:443", "ports are configured separately"],
    ["example.com/path", "without a path"],
    ["a..example.com", "`a..example.com` is neither a domain"],
    [".example.com", "is neither a domain"],
    ["-bad.example.com", "is neither a domain"],
    ["*", "`*` is neither a domain"],
    ["*.com", "every name under a top-level domain"],
    ["10.0.0.0/33", "at most 32 bits"],
    ["::/129", "at most 128 bits"],
    ["10.0.0.0/x", "is not a number of bits"],
    ["1.2.3", "is neither a domain"], // getaddrinfo would read it as 1.2.0.3
    ["0x7f.1", "is neither a domain"],
    ["fe80::1%eth0", "is neither a domain"],
    ["", "is neither a domain"],
  ])("rejects %j naming the entry", (entry, message) => {
    expect(() => parseAllowlist([entry])).toThrow(AllowlistError);
    expect(() => parseAllowlist([entry])).toThrow(message);
  });

  test("bounds the list and each entry", () => {
    expect(() => parseAllowlist(Array.from({ length: 257 }, (_, i) => `h${i}.example.com`))).toThrow("at most 256");
    expect(parseAllowlist(Array.from({ length: 256 }, (_, i) => `h${i}.example.com`)).entries).toHaveLength(256);
    const long = `${"a".repeat(60)}.`.repeat(5) + "com";
    expect(() => parseAllowlist([long])).toThrow("longer than 253 characters");
    // The message stays one readable line whatever was pasted into the config.
    expect(() => parseAllowlist([`${"x".repeat(300)}\n`])).toThrow(/^`x{80}…` is longer/);
  });
});

describe("hostAllowed and addressAllowed", () => {
  const list = allow("example.com", "*.github.com", "10.0.0.0/8", "2001:db8::/32", "::ffff:192.0.2.0/120");

  test("domains match exactly, case-insensitively, with or without the trailing dot", () => {
    expect(hostAllowed(list, "example.com")).toBe(true);
    expect(hostAllowed(list, "EXAMPLE.Com.")).toBe(true);
    expect(hostAllowed(list, "www.example.com")).toBe(false);
    expect(hostAllowed(list, "example.com.evil.net")).toBe(false);
    expect(hostAllowed(list, "notexample.com")).toBe(false);
  });

  test("a wildcard matches every subdomain at any depth but not the domain itself", () => {
    expect(hostAllowed(list, "api.github.com")).toBe(true);
    expect(hostAllowed(list, "a.b.GITHUB.com")).toBe(true);
    expect(hostAllowed(list, "github.com")).toBe(false);
    expect(hostAllowed(list, "evilgithub.com")).toBe(false);
    expect(hostAllowed(list, "github.com.evil.net")).toBe(false);
  });

  test("names that are not names never match, whatever they end with", () => {
    for (const host of [
      "evil.net\0.github.com",
      "evil net.github.com",
      "",
      ".github.com",
      "a..github.com",
      "x.github.com:443",
      "2130706433",
    ]) {
      expect(hostAllowed(list, host), host).toBe(false);
    }
  });

  test("IP literals match CIDR entries only, v4, v6 and v4-mapped v6 alike", () => {
    expect(hostAllowed(list, "10.200.3.4")).toBe(true);
    expect(hostAllowed(list, "11.0.0.1")).toBe(false);
    expect(hostAllowed(list, "[2001:db8:1::5]")).toBe(true);
    expect(hostAllowed(list, "2001:db9::5")).toBe(false);
    expect(hostAllowed(list, "::ffff:10.1.1.1")).toBe(true); // mapped v6 against a v4 entry
    expect(hostAllowed(list, "192.0.2.99")).toBe(true); // v4 against a mapped v6 entry
    expect(hostAllowed(list, "192.0.3.1")).toBe(false);
    // A domain entry never vouches for an address, even the one it resolves to.
    expect(hostAllowed(allow("example.com"), "93.184.215.14")).toBe(false);
    expect(addressAllowed(list, "10.0.0.1")).toBe(true);
    expect(addressAllowed(list, "not an address")).toBe(false);
    expect(addressAllowed(allow("0.0.0.0/0"), "203.0.113.9")).toBe(true);
    expect(addressAllowed(allow("0.0.0.0/0"), "2001:db8::1")).toBe(false);
    expect(addressAllowed(allow("172.16.0.0/12"), "172.31.255.255")).toBe(true);
    expect(addressAllowed(allow("172.16.0.0/12"), "172.32.0.0")).toBe(false);
  });
});

describe("isInternalAddress", () => {
  test.each([
    "127.0.0.1",
    "127.8.9.10",
    "10.1.2.3",
    "172.20.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.100.100.200",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fe80::1%eth0",
    "fd00:ec2::254",
    "fc00::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:7f00:1",
    "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::",
    "not an ip",
  ])("%s is internal", (ip) => {
    expect(isInternalAddress(ip)).toBe(true);
  });

  test.each([
    "1.1.1.1",
    "8.8.8.8",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "::ffff:1.1.1.1",
    "2001:4860:4860::8888",
  ])("%s is not internal", (ip) => {
    expect(isInternalAddress(ip)).toBe(false);
  });
});

// --- The proxy, spoken to directly over its Unix socket -------------------------------------

interface Site {
  port: number;
  /** TCP connections the site has accepted so far. */
  connections: number;
  /** Connections still open. */
  open: Set<Socket>;
  requests: Array<{ url: string; headers: IncomingHttpHeaders }>;
  close: () => Promise<void>;
}

let base: string;
const cleanups: Array<() => Promise<void>> = [];

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "harness-egress-"));
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await rm(base, { recursive: true, force: true });
});

/** An HTTP server on 127.0.0.1 that answers `hello <path>`, or hangs mid-answer on /hang. */
async function startSite(name: string): Promise<Site> {
  const requests: Site["requests"] = [];
  const handler: RequestListener = (req, res) => {
    requests.push({ url: req.url ?? "", headers: req.headers });
    if (req.url === "/hang") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("started\n");
      return;
    }
    res.end(`${name} says hello ${req.url ?? ""}\n`);
  };
  const server: Server = createServer(handler);
  const open = new Set<Socket>();
  const site: Site = { port: 0, connections: 0, open, requests, close: () => Promise.resolve() };
  server.on("connection", (socket: Socket) => {
    site.connections++;
    open.add(socket);
    socket.on("close", () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  site.port = (server.address() as AddressInfo).port;
  site.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      for (const socket of open) socket.destroy();
      server.close(() => {
        resolve();
      });
    });
  cleanups.push(site.close);
  return site;
}

async function startProxy(
  options: Partial<EgressProxyOptions> & { allowlist: EgressAllowlist },
): Promise<{ proxy: EgressProxy; socketPath: string; decisions: EgressDecision[] }> {
  const socketPath = join(base, "egress", "proxy.sock");
  const decisions: EgressDecision[] = [];
  const proxy = await startEgressProxy({ socketPath, onDecision: (decision) => decisions.push(decision), ...options });
  cleanups.push(() => proxy.close());
  return { proxy, socketPath, decisions };
}

/** Names under .test resolve to 127.0.0.1, everything else to nothing: no test reaches real DNS. */
const testResolver = (host: string): Promise<string[]> =>
  Promise.resolve(host.endsWith(".test") || host === "localhost" ? ["127.0.0.1"] : []);

/** A plain-HTTP proxy request (absolute URI) over the Unix socket. */
function proxyGet(
  socketPath: string,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: "GET", path: url, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/** Raw bytes over the Unix socket until the proxy closes or `until` matches what arrived. */
function rawExchange(socketPath: string, send: string, until?: RegExp): Promise<{ text: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath);
    let text = "";
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      resolve({ text, socket });
    };
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
      if (until?.test(text)) finish();
    });
    socket.on("close", finish);
    socket.on("error", (error) => {
      if (!done) reject(error);
    });
    socket.write(send);
  });
}

async function eventually(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe("the egress proxy", () => {
  test("forwards an allowed plain http:// request to the checked address, without proxy credentials", async () => {
    const site = await startSite("site");
    const { socketPath, decisions } = await startProxy({
      allowlist: byOperator("allowed.test", "127.0.0.1/32"),
      ports: [site.port],
      resolve: testResolver,
    });
    const answer = await proxyGet(socketPath, `http://allowed.test:${site.port}/hello?x=1`, {
      host: "somewhere-else.test",
      "proxy-authorization": "Basic c2VjcmV0",
      connection: "keep-alive, x-hop",
      "x-hop": "1",
      "x-kept": "yes",
    });
    expect(answer).toEqual({ status: 200, body: "site says hello /hello?x=1\n" });
    const seen = site.requests[0]!.headers;
    // Host is the URL's authority, not what the client claimed (no virtual-host fronting).
    expect(seen.host).toBe(`allowed.test:${site.port}`);
    expect(seen["proxy-authorization"]).toBeUndefined();
    expect(seen["x-hop"]).toBeUndefined();
    expect(seen["x-kept"]).toBe("yes");
    expect(decisions).toEqual([{ host: "allowed.test", port: site.port, allowed: true }]);
    // The upstream connection was the proxy's alone: it closes once the answer is through.
    await eventually(() => site.open.size === 0, "the upstream connection to close");
  });

  test("CONNECT opens a tunnel to an allowed IP literal, and bytes sent with the CONNECT still arrive", async () => {
    const site = await startSite("site");
    const { socketPath } = await startProxy({ allowlist: byOperator("127.0.0.1/32"), ports: [site.port] });
    // The tunnelled request in the same write as the CONNECT: it arrives in `head` or buffered
    // while the proxy resolves and connects, and must not be lost either way.
    const tunnelled = `GET /through HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`;
    const { text } = await rawExchange(
      socketPath,
      `CONNECT 127.0.0.1:${site.port} HTTP/1.1\r\nHost: 127.0.0.1:${site.port}\r\n\r\n${tunnelled}`,
    );
    expect(text.startsWith("HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK\r\n")).toBe(true);
    expect(text).toContain("site says hello /through\n");
  });

  test("CONNECT to a port outside the allowed ports is 403 and never reaches the site", async () => {
    const site = await startSite("site");
    const { socketPath, decisions } = await startProxy({ allowlist: byOperator("127.0.0.1/32"), ports: [443] });
    const { text } = await rawExchange(socketPath, `CONNECT 127.0.0.1:${site.port} HTTP/1.1\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(text).toContain(
      `Harness egress policy: 127.0.0.1:${site.port} is not allowed for this run ` +
        `(port ${site.port} is not one of the allowed ports 443)\n`,
    );
    expect(site.connections).toBe(0);
    expect(decisions).toEqual([
      {
        host: "127.0.0.1",
        port: site.port,
        allowed: false,
        reason: `port ${site.port} is not one of the allowed ports 443`,
      },
    ]);
  });

  test("hosts off the list are 403, including IP literals when only domains are listed", async () => {
    const site = await startSite("site");
    const { socketPath } = await startProxy({
      allowlist: byOperator("allowed.test"),
      ports: [site.port],
      resolve: testResolver,
    });
    const byName = await proxyGet(socketPath, `http://other.test:${site.port}/`);
    expect(byName.status).toBe(403);
    expect(byName.body).toBe(
      `Harness egress policy: other.test:${site.port} is not allowed for this run ` +
        `(other.test is not on the allowlist)\n`,
    );
    const byAddress = await rawExchange(socketPath, `CONNECT 127.0.0.1:${site.port} HTTP/1.1\r\n\r\n`);
    expect(byAddress.text).toContain("(127.0.0.1 is not on the allowlist)");
    expect(site.connections).toBe(0);
  });

  test(
    "a listed name that resolves to an internal address " + "is refused unless an operator's CIDR covers that address",
    async () => {
      const site = await startSite("site");
      const { socketPath, decisions } = await startProxy({
        allowlist: byOperator("localhost", "metadata.test"),
        ports: [site.port],
        resolve: (host) => Promise.resolve(host === "localhost" ? ["127.0.0.1"] : ["203.0.113.10", "169.254.169.254"]),
      });
      const viaGet = await proxyGet(socketPath, `http://localhost:${site.port}/`);
      expect(viaGet.status).toBe(403);
      expect(viaGet.body).toContain(
        "(localhost resolves to the internal address 127.0.0.1, " +
          "which no CIDR in the operator's HARNESS_NETWORK_ALLOW allows)",
      );
      const viaConnect = await rawExchange(socketPath, `CONNECT LocalHost.:${site.port} HTTP/1.1\r\n\r\n`);
      expect(viaConnect.text).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
      expect(viaConnect.text).toContain("resolves to the internal address 127.0.0.1");
      // One internal address among public ones is enough: a retry could land on it.
      const mixed = await proxyGet(socketPath, `http://metadata.test:${site.port}/latest/meta-data/`);
      expect(mixed.body).toContain("resolves to the internal address 169.254.169.254");
      expect(site.connections).toBe(0);
      expect(decisions.every((decision) => !decision.allowed)).toBe(true);

      // Control: the same name with the address listed explicitly goes through, so the refusal
      // above is the rule at work and not a broken path.
      const explicit = await startEgressProxy({
        socketPath: join(base, "explicit.sock"),
        allowlist: byOperator("localhost", "127.0.0.1/32"),
        ports: [site.port],
        resolve: testResolver,
      });
      cleanups.push(() => explicit.close());
      expect(await proxyGet(join(base, "explicit.sock"), `http://localhost:${site.port}/ok`)).toEqual({
        status: 200,
        body: "site says hello /ok\n",
      });
    },
  );

  test("malformed requests are 400, unreachable or unresolvable targets 502", async () => {
    const { socketPath } = await startProxy({
      allowlist: byOperator("allowed.test", "nowhere.test", "127.0.0.1/32"),
      ports: [1],
      resolve: (host) => (host === "nowhere.test" ? Promise.reject(new Error("ENOTFOUND")) : testResolver(host)),
    });
    expect((await rawExchange(socketPath, "CONNECT no-port-here HTTP/1.1\r\n\r\n")).text).toMatch(
      /^HTTP\/1\.1 400 Bad Request\r\n/,
    );
    expect((await rawExchange(socketPath, "CONNECT [::1:443 HTTP/1.1\r\n\r\n")).text).toMatch(/^HTTP\/1\.1 400 /);
    expect((await rawExchange(socketPath, "CONNECT a b:443 HTTP/1.1\r\n\r\n")).text).toMatch(/^HTTP\/1\.1 400 /);
    expect((await proxyGet(socketPath, "/relative")).status).toBe(400);
    expect((await proxyGet(socketPath, "https://allowed.test/")).status).toBe(400);
    // Port 1 on 127.0.0.1: allowed by policy, nothing listens.
    const refused = await proxyGet(socketPath, "http://allowed.test:1/");
    expect(refused.status).toBe(502);
    expect(refused.body).toContain("ECONNREFUSED");
    const tunnel = await rawExchange(socketPath, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n");
    expect(tunnel.text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    const unresolved = await proxyGet(socketPath, "http://nowhere.test:1/");
    expect(unresolved.status).toBe(502);
    expect(unresolved.body).toContain("could not resolve nowhere.test: ENOTFOUND");
  });

  test("connections over the cap get 503 while the others keep working", async () => {
    const site = await startSite("site");
    const { proxy, socketPath } = await startProxy({
      allowlist: byOperator("127.0.0.1/32"),
      ports: [site.port],
      maxConnections: 2,
    });
    const idle = [connect(socketPath), connect(socketPath)];
    cleanups.push(async () => {
      for (const socket of idle) socket.destroy();
      await Promise.resolve();
    });
    await eventually(() => proxy.openConnections() === 2, "two open connections");
    const extra = await rawExchange(
      socketPath,
      `GET http://127.0.0.1:${site.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
    );
    expect(extra.text).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(site.connections).toBe(0);
    idle[0]!.destroy();
    await eventually(() => proxy.openConnections() === 1, "a slot to free up");
    expect((await proxyGet(socketPath, `http://127.0.0.1:${site.port}/after`)).body).toBe("site says hello /after\n");
  });

  test("close() ends open tunnels, removes the socket file and is safe to repeat", async () => {
    const site = await startSite("site");
    const { proxy, socketPath } = await startProxy({ allowlist: byOperator("127.0.0.1/32"), ports: [site.port] });
    expect((await stat(socketPath)).mode & 0o777).toBe(0o600);
    const { socket } = await rawExchange(
      socketPath,
      `CONNECT 127.0.0.1:${site.port} HTTP/1.1\r\n\r\n`,
      /Connection Established\r\n\r\n/,
    );
    await eventually(() => site.open.size === 1, "the tunnel to reach the site");
    const clientClosed = new Promise<void>((resolve) =>
      socket.on("close", () => {
        resolve();
      }),
    );
    await proxy.close();
    await clientClosed;
    await eventually(() => site.open.size === 0, "the site to see the tunnel close");
    expect(existsSync(socketPath)).toBe(false);
    await proxy.close();
  });

  test("a stale socket file is replaced, a live one is not", async () => {
    const { proxy, socketPath } = await startProxy({ allowlist: byOperator("allowed.test") });
    await expect(startEgressProxy({ socketPath, allowlist: byOperator() })).rejects.toThrow(
      "Another process is listening",
    );
    await proxy.close();
    await writeFile(socketPath, "not a socket");
    await expect(startEgressProxy({ socketPath, allowlist: byOperator() })).rejects.toThrow("is not a socket");
    await rm(socketPath);
    // What a harness killed with SIGKILL leaves behind: a socket file nobody listens on.
    const crashed = await runProcess({
      argv: [
        process.execPath,
        "-e",
        `require("node:net").createServer().listen(${JSON.stringify(socketPath)}, ` +
          `() => process.kill(process.pid, "SIGKILL"))`,
      ],
      cwd: base,
      env: {},
      timeout: 10_000,
    });
    expect(crashed.exitCode).toBe(128 + 9);
    expect((await stat(socketPath)).isSocket()).toBe(true);
    const again = await startEgressProxy({ socketPath, allowlist: byOperator() });
    await again.close();
  });
});

describe("egressCommand", () => {
  test("puts node, the forwarder, the socket and the port before the command", () => {
    expect(egressCommand("/opt/f.mjs", "/run/egress.sock", ["git", "fetch"])).toEqual([
      process.execPath,
      "/opt/f.mjs",
      "/run/egress.sock",
      String(PROXY_PORT),
      "--",
      "git",
      "fetch",
    ]);
    expect(egressCommand("/opt/f.mjs", "/s", ["true"], 8080, "/usr/bin/node").slice(0, 5)).toEqual([
      "/usr/bin/node",
      "/opt/f.mjs",
      "/s",
      "8080",
      "--",
    ]);
    expect(() => egressCommand("f.mjs", "/s", ["true"])).toThrow("absolute");
    expect(() => egressCommand("/f.mjs", "/s", [])).toThrow("needs a command");
    expect(() => egressCommand("/f.mjs", "/s", ["true"], 70000)).toThrow("not a TCP port");
  });
});

// --- The whole path, from a sandbox with no network of its own -------------------------------

describe.skipIf(!probe.available || !curlPath)("a sandboxed command behind the egress proxy", () => {
  interface Sandboxed {
    socketPath: string;
    proxy: EgressProxy;
    decisions: EgressDecision[];
    run: (argv: string[], options?: { timeout?: number; proxied?: boolean }) => ReturnType<typeof runProcess>;
  }

  async function sandboxed(options: Partial<EgressProxyOptions> & { allowlist: EgressAllowlist }): Promise<Sandboxed> {
    const workDir = join(base, "work");
    const homeDir = join(base, "home");
    const forwarderDir = join(base, "forwarder");
    const socketDir = join(base, "egress");
    for (const dir of [workDir, homeDir, forwarderDir]) await mkdir(dir);
    const forwarderFile = join(forwarderDir, "forwarder.mjs");
    await writeFile(forwarderFile, FORWARDER_SOURCE);
    const { proxy, socketPath, decisions } = await startProxy({ resolve: testResolver, ...options });
    // What the local sandbox does for its sandbox user (who commands run as when the tests are root).
    const user = sandboxUserFor();
    for (const dir of [base, forwarderDir, socketDir]) await letSandboxTraverse(dir, user);
    for (const dir of [workDir, homeDir]) await giveToSandbox(dir, user);
    await letSandboxRead(forwarderFile, user);
    await letSandboxRead(socketPath, user, 0o660);
    const spec = {
      workDir,
      homeDir,
      network: "none" as const,
      readOnlyPaths: [forwarderDir, socketDir, ...nodeReadOnly],
    };
    const run: Sandboxed["run"] = (argv, { timeout = 20_000, proxied = true } = {}) =>
      runProcess({
        ...isolatedCommand(spec, proxied ? egressCommand(forwarderFile, socketPath, argv) : argv),
        cwd: workDir,
        env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: homeDir },
        timeout,
      });
    return { socketPath, proxy, decisions, run };
  }

  test("curl reaches an allowed site by name and by address, over plain HTTP and through CONNECT", async () => {
    const site = await startSite("allowed");
    const { run, decisions } = await sandboxed({
      allowlist: byOperator("allowed.test", "127.0.0.1/32"),
      ports: [site.port],
    });
    const url = `http://allowed.test:${site.port}`;
    // The forwarder sets NO_PROXY=127.0.0.1 (loopback stays inside the sandbox), so a URL with
    // the literal 127.0.0.1 only goes to the proxy when curl is told to ignore NO_PROXY.
    const result = await run([
      "sh",
      "-c",
      `curl -sS "$1/hello" && curl -sS -p "$1/tunnel" && curl -sS --noproxy '' "http://127.0.0.1:$2/literal"`,
      "sh",
      url,
      String(site.port),
    ]);
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe("allowed says hello /hello\nallowed says hello /tunnel\nallowed says hello /literal\n");
    expect(result.exitCode).toBe(0);
    expect(decisions.map((decision) => decision.allowed)).toEqual([true, true, true]);
  });

  test(
    "a site off the allowlist gets 403 with the policy text and sees no connection; " +
      "without the proxy nothing connects at all",
    async () => {
      const allowed = await startSite("allowed");
      const denied = await startSite("denied");
      const { run } = await sandboxed({ allowlist: byOperator("allowed.test", "127.0.0.1/32"), ports: [allowed.port] });
      const viaProxy = await run([
        "curl",
        "-sS",
        "-w",
        "\n%{http_code}",
        "--noproxy",
        "",
        `http://127.0.0.1:${denied.port}/secret`,
      ]);
      expect(viaProxy.stdout).toBe(
        `Harness egress policy: 127.0.0.1:${denied.port} is not allowed for this run ` +
          `(port ${denied.port} is not one of the allowed ports ${allowed.port})\n\n403`,
      );
      const tunnel = await run(["curl", "-sS", "-p", `http://denied.test:${denied.port}/secret`]);
      expect(tunnel.exitCode).not.toBe(0);
      expect(tunnel.stderr).toContain("403");

      // Straight to the host's 127.0.0.1, bypassing the proxy: the sandbox's loopback is its own.
      for (const port of [denied.port, allowed.port]) {
        const direct = await run(["curl", "-sS", "--noproxy", "*", `http://127.0.0.1:${port}/direct`], {
          proxied: false,
        });
        expect(direct.exitCode).toBe(7); // CURLE_COULDNT_CONNECT
      }
      expect(denied.connections).toBe(0);
      // Control: the server was up the whole time and reachable from the host.
      const fromHost = await runProcess({
        argv: ["curl", "-sS", "--noproxy", "*", `http://127.0.0.1:${denied.port}/control`],
        cwd: base,
        env: { PATH: "/usr/bin:/bin" },
        timeout: 10_000,
      });
      expect(fromHost.stdout).toBe("denied says hello /control\n");
    },
  );

  test("the command's exit code and signal death come through the forwarder", async () => {
    const { run } = await sandboxed({ allowlist: byOperator() });
    expect((await run(["sh", "-c", "exit 7"])).exitCode).toBe(7);
    expect((await run(["sh", "-c", "kill -TERM $$"])).exitCode).toBe(128 + 15);
    const missing = await run(["no-such-command-here"]);
    expect(missing.exitCode).toBe(127);
    expect(missing.stderr).toContain("cannot run no-such-command-here");
  });

  test("the forwarder refuses clearly when its port is taken", async () => {
    const { run, socketPath } = await sandboxed({ allowlist: byOperator() });
    const inner = egressCommand(join(base, "forwarder", "forwarder.mjs"), socketPath, ["true"]);
    const result = await run(inner);
    expect(result.exitCode).toBe(125);
    expect(result.stderr).toContain(
      `harness egress forwarder: 127.0.0.1:${PROXY_PORT} is already in use inside the sandbox`,
    );
  });

  test("a command killed by the timeout leaves no connection open at the proxy or the site", async () => {
    const site = await startSite("slow");
    const { run, proxy } = await sandboxed({ allowlist: byOperator("slow.test", "127.0.0.1/32"), ports: [site.port] });
    const url = `http://slow.test:${site.port}/hang`;
    const result = await run(["sh", "-c", `curl -sN "$1" & curl -sN -p "$1" & wait`, "sh", url], { timeout: 1_500 });
    expect(result.timedOut).toBe(true);
    // Both requests were in flight: a plain forwarded one and a tunnel.
    expect(result.stdout).toBe("started\nstarted\n");
    expect(site.requests).toHaveLength(2);
    await eventually(() => proxy.openConnections() === 0, "the proxy to see the sandbox's connections close");
    await eventually(() => site.open.size === 0, "the site to see the proxy's connections close");
  });
});
