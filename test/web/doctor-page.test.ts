import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import type { Viewer, WebAuth } from "../../src/web/auth/types.js";
import { adminsFrom } from "../../src/web/auth/settings.js";
import { createDoctorPage, type CheckReport } from "../../src/web/doctor-page.js";

/** Sessions by cookie value: `s-ops` is an admin by login, `s-id` by account id, `s-dev` neither. */
class StubAuth implements WebAuth {
  readonly sessions = new Map<string, Viewer>([
    ["s-ops", { login: "Ops-Lead", id: 10 }],
    ["s-id", { login: "renamed-later", id: 4242 }],
    ["s-dev", { login: "developer", id: 11 }],
  ]);
  handle(): Promise<boolean> {
    return Promise.resolve(false);
  }
  viewer(req: IncomingMessage): Promise<Viewer | undefined> {
    const session = /(?:^|;\s*)session=([^;]+)/.exec(req.headers.cookie ?? "")?.[1];
    return Promise.resolve(session ? this.sessions.get(session) : undefined);
  }
  canRead(): Promise<boolean> {
    return Promise.resolve(true);
  }
  loginUrl(returnTo: string): string {
    return `/auth/login?return_to=${encodeURIComponent(returnTo)}`;
  }
}

const REPORTS: CheckReport[] = [
  { name: "Node.js", status: "ok", detail: "v20.20.2", durationMs: 1 },
  {
    name: "Installation acme",
    status: "fail",
    detail: 'has not granted "checks: read" <script>alert(1)</script>',
    fix: "an owner accepts the new permissions at https://github.com/settings/installations/1",
    durationMs: 120,
  },
  { name: "Daytona", status: "skip", detail: "not used (HARNESS_SANDBOX=local)", durationMs: 0 },
];

let server: Server | undefined;
let clock = Date.parse("2026-11-28T12:00:00Z");
let runs = 0;

async function serve(check: () => Promise<CheckReport[]> = () => Promise.resolve(REPORTS)): Promise<string> {
  const page = createDoctorPage({
    auth: new StubAuth(),
    admins: adminsFrom("ops-lead, 4242"),
    check: () => {
      runs += 1;
      return check();
    },
    now: () => new Date(clock),
    freshForMs: 30_000,
  });
  server = createServer((req, res) => {
    void page(req, res).then((answered) => {
      if (!answered) res.writeHead(418).end();
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
}

function get(url: string, session?: string): Promise<Response> {
  return fetch(`${url}/doctor`, { redirect: "manual", headers: session ? { cookie: `session=${session}` } : {} });
}

afterEach(async () => {
  runs = 0;
  await new Promise<void>((resolve) => {
    if (server)
      server.close(() => {
        resolve();
      });
    else resolve();
  });
  server = undefined;
});

describe("the /doctor page", () => {
  test("an admin sees every check with its mark, what was found and the fix, escaped", async () => {
    const url = await serve();
    const res = await get(url, "s-ops");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    const page = await res.text();
    expect(page).toContain("1 of 3 checks failed.");
    expect(page).toContain('<td>✓</td><th scope="row">Node.js</th>');
    expect(page).toContain('<td>✗</td><th scope="row">Installation acme</th>');
    expect(page).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(page).not.toContain("<script>alert");
    expect(page).toContain("<strong>Fix:</strong> an owner accepts the new permissions");
    expect(page).toContain('<td>–</td><th scope="row">Daytona</th>');
    expect(page).toContain("Checked 2026-11-28 12:00:00 UTC");
  });

  test("an admin listed by account id is let in whatever their login is now", async () => {
    const url = await serve();
    expect((await get(url, "s-id")).status).toBe(200);
  });

  test("signed out: sent to sign in and back; signed in but not an admin: not found, and no check runs", async () => {
    const url = await serve();
    const out = await get(url);
    expect(out.status).toBe(302);
    expect(out.headers.get("location")).toBe("/auth/login?return_to=%2Fdoctor");
    const dev = await get(url, "s-dev");
    expect(dev.status).toBe(404);
    expect(await dev.text()).toBe("Not found\n");
    expect(runs).toBe(0);
  });

  test("looks share one run of the checks while it is fresh, and run them again after", async () => {
    let release: (reports: CheckReport[]) => void = () => undefined;
    const url = await serve(
      () =>
        new Promise<CheckReport[]>((resolve) => {
          release = resolve;
        }),
    );
    const looks = [get(url, "s-ops"), get(url, "s-ops"), get(url, "s-id")];
    await expect.poll(() => runs).toBe(1);
    release(REPORTS);
    for (const res of await Promise.all(looks)) expect(res.status).toBe(200);
    await get(url, "s-ops");
    expect(runs).toBe(1);
    clock += 30_000;
    const again = get(url, "s-ops");
    await expect.poll(() => runs).toBe(2);
    release(REPORTS);
    expect((await again).status).toBe(200);
  });

  test("checks that fail to run answer a readable page, and the next look tries again", async () => {
    const url = await serve(() => Promise.reject(new Error("boom")));
    const res = await get(url, "s-ops");
    expect(res.status).toBe(500);
    expect(await res.text()).toContain("The checks could not be run just now");
    await get(url, "s-ops");
    expect(runs).toBe(2);
  });

  test("HARNESS_ADMINS takes logins and ids and refuses anything else", () => {
    expect(adminsFrom(" Alice,  12345 bob-2 ")).toEqual(["alice", "12345", "bob-2"]);
    expect(adminsFrom(undefined)).toEqual([]);
    expect(() => adminsFrom("alice,<script>")).toThrow(/neither a GitHub login nor an account id/);
  });
});
