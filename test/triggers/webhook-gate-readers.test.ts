import { createHmac } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import { createLingeringClose } from "../../src/triggers/lingering-close.js";
import { createWebhookGate, type WebhookGateOptions } from "../../src/triggers/webhook-gate.js";
import { waitFor } from "../helpers/app-process.js";

/*
 * How many unverified webhook bodies are read at once, how long one may take, and that the
 * rest of the server keeps answering meanwhile. The gate behind a plain HTTP server on
 * 127.0.0.1, its limits lowered so that small bodies show them.
 */

const SECRET = "gate-secret";
let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => {
    if (server === undefined) resolve();
    else
      server.close(() => {
        resolve();
      });
    server?.closeAllConnections();
  });
  server = undefined;
});

type Options = Partial<Omit<WebhookGateOptions, "secret" | "closer" | "log">>;

async function gatedServer(options: Options) {
  const refusals: string[] = [];
  const gate = createWebhookGate({
    secret: SECRET,
    closer: createLingeringClose(),
    log: {
      warn: (fields) => {
        refusals.push(String(fields["reason"]));
      },
    },
    ...options,
  });
  server = createServer((req, res) => {
    if (req.url === "/healthz") {
      res.writeHead(200).end("ok");
      return;
    }
    void gate(req, res).then((admitted) => {
      if (admitted) res.writeHead(200).end("admitted");
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { gate, refusals, port: (server.address() as AddressInfo).port };
}

const sign = (body: Buffer, secret = SECRET): string =>
  `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;

/**
 * A delivery of `size` bytes (a content-length, so a size the gate can trust) of which only
 * `first` are sent until `finish` is called; signed with another secret unless `signed`.
 */
function delivery(port: number, size: number, first: number, signed = false) {
  const body = Buffer.alloc(size, 0x61);
  let status = 0;
  let headers: Record<string, string | string[] | undefined> = {};
  const req = request({
    host: "127.0.0.1",
    port,
    path: "/webhooks",
    method: "POST",
    agent: false,
    headers: {
      "content-type": "application/json",
      "content-length": String(size),
      "x-github-event": "issues",
      "x-github-delivery": "d",
      "x-hub-signature-256": sign(body, signed ? SECRET : "another secret"),
    },
  });
  const answered = new Promise<number>((resolve) => {
    req.on("response", (res) => {
      status = res.statusCode ?? 0;
      headers = res.headers;
      res.resume();
      resolve(status);
    });
    req.on("error", () => {
      resolve(status || -1);
    });
  });
  req.write(body.subarray(0, first));
  return {
    answered,
    headers: () => headers,
    /** Sends the rest of the body; resolves once it is all handed to the kernel. */
    finish: () =>
      new Promise<void>((resolve) => {
        req.end(body.subarray(first), resolve);
      }),
    abandon: () => req.destroy(),
  };
}

function healthz(port: number): Promise<number> {
  return new Promise((resolve) => {
    request({ host: "127.0.0.1", port, path: "/healthz", agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on("error", () => {
        resolve(-1);
      })
      .end();
  });
}

describe("unverified webhook bodies are read a few at a time", () => {
  test("at most `readers` large bodies are read at once; the rest wait unread, first come first served", async () => {
    const { port, gate } = await gatedServer({ readers: 2, smallBytes: 1024 });
    // One at a time, so that the order they reach the server is known.
    const arrive = async (reading: number, waiting: number) => {
      const each = delivery(port, 256 * 1024, 16 * 1024);
      await waitFor(`${String(reading)} read, ${String(waiting)} waiting`, () => {
        const state = gate.state();
        return state.reading === reading && state.waiting === waiting;
      });
      return each;
    };
    const a = await arrive(1, 0);
    const b = await arrive(2, 0);
    const c = await arrive(2, 1);
    const d = await arrive(2, 2);
    const order: string[] = [];
    for (const [name, each] of [
      ["a", a],
      ["b", b],
      ["c", c],
      ["d", d],
    ] as const)
      void each.answered.then(() => order.push(name));
    // c and d send their whole bodies first; read at once, they would be answered first.
    await Promise.all([c.finish(), d.finish()]);
    await a.finish();
    expect(await Promise.all([a.answered, c.answered, d.answered])).toEqual([401, 401, 401]);
    expect(gate.state()).toEqual({ reading: 1, waiting: 0 });
    await b.finish();
    expect(await b.answered).toBe(401);
    expect(order).toEqual(["a", "c", "d", "b"]);
    expect(gate.state()).toEqual({ reading: 0, waiting: 0 });
  });

  test("a small body never waits behind large ones", async () => {
    const { port, gate } = await gatedServer({ readers: 1, smallBytes: 64 * 1024 });
    const large = [0, 1].map(() => delivery(port, 256 * 1024, 16 * 1024));
    await waitFor("one read, one waiting", () => gate.state().reading === 1 && gate.state().waiting === 1);
    const small = delivery(port, 8 * 1024, 0, true);
    await small.finish();
    expect(await small.answered).toBe(200);
    expect(gate.state()).toEqual({ reading: 1, waiting: 1 });
    for (const each of large) each.abandon();
  });

  test("the line is bounded: past it a large body is refused 503 with retry-after, unread", async () => {
    const { port, gate, refusals } = await gatedServer({ readers: 1, maxWaiting: 1, smallBytes: 1024 });
    const held = [0, 1].map(() => delivery(port, 256 * 1024, 16 * 1024));
    await waitFor("one read, one waiting", () => gate.state().reading === 1 && gate.state().waiting === 1);
    const third = delivery(port, 256 * 1024, 16 * 1024);
    expect(await third.answered).toBe(503);
    expect(third.headers()["retry-after"]).toBe("5");
    expect(refusals).toEqual(["too many large webhook bodies at once; try again shortly"]);
    expect(gate.state()).toEqual({ reading: 1, waiting: 1 });
    for (const each of held) each.abandon();
  });

  test("a body being read that is not whole within readMs is refused 408, and the next in line is read", async () => {
    // A second, so that the next delivery is surely in line before the first one's time is up.
    const { port, gate, refusals } = await gatedServer({ readers: 1, smallBytes: 1024, readMs: 1_000 });
    const stalled = delivery(port, 256 * 1024, 16 * 1024);
    await waitFor("one read", () => gate.state().reading === 1);
    const next = delivery(port, 256 * 1024, 16 * 1024);
    await waitFor("one waiting", () => gate.state().waiting === 1);
    await next.finish();
    expect(await stalled.answered).toBe(408);
    expect(await next.answered).toBe(401);
    expect(refusals[0]).toBe("the body did not arrive within 1 s");
    expect(gate.state()).toEqual({ reading: 0, waiting: 0 });
  });

  test("a body waiting longer than waitMs for a reader is refused 503 with retry-after", async () => {
    const { port, gate } = await gatedServer({ readers: 1, smallBytes: 1024, waitMs: 100 });
    const holder = delivery(port, 256 * 1024, 16 * 1024);
    await waitFor("one read", () => gate.state().reading === 1);
    const waiting = delivery(port, 256 * 1024, 16 * 1024);
    expect(await waiting.answered).toBe(503);
    expect(waiting.headers()["retry-after"]).toBe("5");
    expect(gate.state()).toEqual({ reading: 1, waiting: 0 });
    holder.abandon();
    await waitFor("the reader free", () => gate.state().reading === 0);
  });

  test("/healthz answers while eight 16 MB forged bodies stream in, two of them read at a time", async () => {
    const { port, gate } = await gatedServer({});
    const size = 16 * 1024 * 1024;
    const flood = Array.from({ length: 8 }, () => delivery(port, size, 1024 * 1024));
    await waitFor("two read, six waiting", () => gate.state().reading === 2 && gate.state().waiting === 6);
    const done = Promise.all(flood.map((each) => each.finish().then(() => each.answered)));
    const flooding = { over: false };
    void done.then(() => (flooding.over = true));
    // Ask until the flood is over; count the answers that came while large bodies were still in.
    let during = 0;
    while (!flooding.over) {
      expect(await healthz(port)).toBe(200);
      const { reading, waiting } = gate.state();
      if (reading + waiting > 0) during++;
      if (reading > 2) throw new Error(`${String(reading)} bodies read at once`);
    }
    expect(await done).toEqual(Array.from({ length: 8 }, () => 401));
    expect(during).toBeGreaterThanOrEqual(3);
  });
});
