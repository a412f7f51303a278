import { mkdtemp, rm } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  hostListed,
  isInternalAddress,
  mayConnect,
  parseAllowlist,
  type EgressAllowlist,
} from "../../src/sandbox/egress/allowlist.js";
import { startEgressProxy, type EgressDecision } from "../../src/sandbox/egress/proxy.js";

/*
 * Who may open an internal address through the egress proxy: the operator (HARNESS_NETWORK_ALLOW)
 * and nobody else. A repository's entries reach the proxy apart from the operator's, and even a
 * repository CIDR that covers 127.0.0.1 (which validation refuses, so these tests hand it to the
 * proxy directly) opens nothing internal. The proxy is spoken to over its Unix socket; every
 * site is a server this file starts on 127.0.0.1 and names are resolved by the proxy's `resolve`
 * option, never by DNS.
 */

const entries = (...list: string[]) => parseAllowlist(list).entries;
const allowlist = (lists: { operator?: string[]; repository?: string[] }): EgressAllowlist => ({
  operator: entries(...(lists.operator ?? [])),
  repository: entries(...(lists.repository ?? [])),
});

/** What the injected resolver answers: a public name would answer 203.0.113.x, never these. */
const ADDRESSES: Record<string, string[]> = {
  localhost: ["127.0.0.1"],
  "loopback.test": ["127.0.0.1"],
  "metadata.test": ["169.254.169.254"],
  "mapped.test": ["::ffff:127.0.0.1"],
  "nat64-local.test": ["64:ff9b:1::a9fe:a9fe"],
  "nat64.test": ["64:ff9b::7f00:1"],
};
const resolve = (host: string): Promise<string[]> => Promise.resolve(ADDRESSES[host] ?? []);

let base: string;
const cleanups: Array<() => Promise<void>> = [];

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "harness-egress-internal-"));
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await rm(base, { recursive: true, force: true });
});

/** An HTTP server on 127.0.0.1, standing for the host's Redis or metadata service; counts connections. */
async function startSite(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer((req, res) => res.end(`internal says hello ${req.url ?? ""}\n`));
  server.on("connection", () => connections++);
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  cleanups.push(
    () =>
      new Promise<void>((closed) => {
        server.closeAllConnections();
        server.close(() => {
          closed();
        });
      }),
  );
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

let proxies = 0;
async function startProxy(
  list: EgressAllowlist,
  port: number,
): Promise<{ socketPath: string; decisions: EgressDecision[] }> {
  const socketPath = join(base, `proxy-${++proxies}.sock`);
  const decisions: EgressDecision[] = [];
  const proxy = await startEgressProxy({
    socketPath,
    allowlist: list,
    ports: [port],
    resolve,
    onDecision: (decision) => decisions.push(decision),
  });
  cleanups.push(() => proxy.close());
  return { socketPath, decisions };
}

/** CONNECT host:port, then one GET through the tunnel; everything the proxy sent back until it closed. */
function connectThrough(socketPath: string, authority: string): Promise<string> {
  return new Promise((done, fail) => {
    const socket: Socket = connect(socketPath);
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("close", () => {
      done(text);
    });
    socket.on("error", fail);
    socket.write(
      `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n` +
        `GET /secret HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`,
    );
  });
}

/** A plain-HTTP proxy request (absolute URI) over the Unix socket. */
function proxyGet(socketPath: string, url: string): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = request({ socketPath, method: "GET", path: url }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => {
        done({ status: res.statusCode ?? 0, body });
      });
    });
    req.on("error", fail);
    req.end();
  });
}

const REFUSED = /^HTTP\/1\.1 403 Forbidden\r\n/;
const TUNNELLED =
  /^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK\r\n[\s\S]*internal says hello \/secret\n$/;

describe("the egress proxy and internal addresses", () => {
  test.each(["127.0.0.1/32", "127.0.0.0/8", "0.0.0.0/0", "0.0.0.0/1"])(
    "a repository CIDR %s does not open a server on 127.0.0.1; the same CIDR from the operator does",
    async (cidr) => {
      const site = await startSite();
      const repository = await startProxy(allowlist({ repository: [cidr] }), site.port);
      const refused = await connectThrough(repository.socketPath, `127.0.0.1:${site.port}`);
      expect(refused).toMatch(REFUSED);
      expect(refused).toContain(
        `Harness egress policy: 127.0.0.1:${site.port} is not allowed for this run ` +
          "(127.0.0.1 is an internal address, which only the operator's HARNESS_NETWORK_ALLOW can open)",
      );
      const plain = await proxyGet(repository.socketPath, `http://127.0.0.1:${site.port}/secret`);
      expect(plain.status).toBe(403);
      expect(site.connections()).toBe(0);
      expect(repository.decisions.map((decision) => decision.allowed)).toEqual([false, false]);

      const operator = await startProxy(allowlist({ operator: [cidr] }), site.port);
      expect(await connectThrough(operator.socketPath, `127.0.0.1:${site.port}`)).toMatch(TUNNELLED);
      expect(site.connections()).toBe(1);
    },
  );

  test("the v6 forms of loopback are refused to a repository CIDR too", async () => {
    const site = await startSite();
    const { socketPath } = await startProxy(allowlist({ repository: ["::/0", "::ffff:0:0/96"] }), site.port);
    for (const host of ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::1]", "[64:ff9b::7f00:1]"]) {
      const text = await connectThrough(socketPath, `${host}:${site.port}`);
      expect(text).toMatch(REFUSED);
      expect(text).toContain("is an internal address, which only the operator's HARNESS_NETWORK_ALLOW can open");
    }
    expect(site.connections()).toBe(0);
  });

  test("NAT64 local-use addresses (64:ff9b:1::/48), which a site's own translator routes, are refused", async () => {
    const site = await startSite();
    const { socketPath } = await startProxy(
      allowlist({ repository: ["64:ff9b:1::/48", "nat64-local.test"] }),
      site.port,
    );
    const literal = await connectThrough(socketPath, `[64:ff9b:1::a00:1]:${site.port}`);
    expect(literal).toMatch(REFUSED);
    expect(literal).toContain("64:ff9b:1::a00:1] is an internal address");
    const byName = await connectThrough(socketPath, `nat64-local.test:${site.port}`);
    expect(byName).toMatch(REFUSED);
    expect(byName).toContain("nat64-local.test resolves to the internal address 64:ff9b:1::a9fe:a9fe");
  });

  test(
    "a repository's name that resolves to 127.0.0.1 or 169.254.169.254 is refused, whatever the repository's " +
      "CIDRs cover, and admitted when an operator CIDR covers the address",
    async () => {
      const site = await startSite();
      const names = ["loopback.test", "metadata.test", "mapped.test", "nat64.test"];
      const { socketPath, decisions } = await startProxy(
        allowlist({ repository: [...names, "0.0.0.0/0", "::/0"] }),
        site.port,
      );
      for (const name of names) {
        const text = await connectThrough(socketPath, `${name}:${site.port}`);
        expect(text).toMatch(REFUSED);
        expect(text).toContain(
          `(${name} resolves to the internal address ${ADDRESSES[name]?.[0] ?? ""}, ` +
            "which no CIDR in the operator's HARNESS_NETWORK_ALLOW allows)",
        );
      }
      expect(site.connections()).toBe(0);
      expect(decisions.every((decision) => !decision.allowed)).toBe(true);

      // The same repository name, with the address in the operator's list: the rule, not a broken path.
      const operator = await startProxy(
        allowlist({ operator: ["127.0.0.1/32"], repository: ["loopback.test"] }),
        site.port,
      );
      expect(await connectThrough(operator.socketPath, `loopback.test:${site.port}`)).toMatch(TUNNELLED);
    },
  );

  test("a name the operator lists is held to the same rule: only an operator CIDR opens its address", async () => {
    const site = await startSite();
    const { socketPath } = await startProxy(allowlist({ operator: ["loopback.test"] }), site.port);
    expect(await connectThrough(socketPath, `loopback.test:${site.port}`)).toMatch(REFUSED);
    expect(site.connections()).toBe(0);
  });
});

describe("mayConnect and hostListed", () => {
  test("an internal address needs an operator CIDR; a public one needs none", () => {
    const repositoryWide = allowlist({ repository: ["0.0.0.0/0", "::/0"] });
    const operatorMetadata = allowlist({ operator: ["169.254.169.254"], repository: ["0.0.0.0/0"] });
    for (const ip of ["127.0.0.1", "169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "10.0.0.1"]) {
      expect(mayConnect(repositoryWide, ip)).toBe(false);
    }
    expect(mayConnect(operatorMetadata, "169.254.169.254")).toBe(true);
    expect(mayConnect(operatorMetadata, "::ffff:169.254.169.254")).toBe(true);
    expect(mayConnect(operatorMetadata, "169.254.169.253")).toBe(false);
    expect(mayConnect(allowlist({}), "203.0.113.10")).toBe(true);
    expect(mayConnect(allowlist({ operator: ["0.0.0.0/0"] }), "not an address")).toBe(false);
  });

  test("either list may name a host; neither alone decides whether its address is reached", () => {
    const list = allowlist({ operator: ["api.anthropic.com"], repository: ["registry.npmjs.org", "203.0.113.0/24"] });
    expect(hostListed(list, "api.anthropic.com")).toBe(true);
    expect(hostListed(list, "registry.npmjs.org")).toBe(true);
    expect(hostListed(list, "203.0.113.7")).toBe(true);
    expect(hostListed(list, "evil.example")).toBe(false);
  });

  test.each(["64:ff9b:1::1", "64:ff9b:1:ffff::a9fe:a9fe"])("NAT64 local-use %s is internal", (ip) => {
    expect(isInternalAddress(ip)).toBe(true);
  });

  test("the NAT64 well-known prefix is internal only where it carries an internal v4 address", () => {
    expect(isInternalAddress("64:ff9b::a9fe:a9fe")).toBe(true);
    expect(isInternalAddress("64:ff9b::808:808")).toBe(false);
  });
});
