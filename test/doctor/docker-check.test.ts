import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerCheck, userNamespaces } from "../../src/doctor/checks/sandbox.js";
import { remapsUserNamespaces } from "../../src/sandbox/docker/user-namespaces.js";
import { settingsCheck } from "../../src/doctor/checks/settings.js";
import { runDoctor } from "../../src/doctor/doctor.js";
import type { CheckReport } from "../../src/doctor/runner.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";

// The Docker check against a real Docker Engine (this machine's, or one the test starts), and
// against an address where none answers.
const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`Docker doctor tests against an engine skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;
let image = "";

beforeAll(async () => {
  if (live) image = await testImage(live.docker);
}, 300_000);

afterAll(async () => {
  if (live?.started) await live.stop();
});

function env(changes: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env["PATH"],
    APP_ID: "12",
    PRIVATE_KEY: fakePem(),
    WEBHOOK_SECRET: fakeToken("whsec-", 24),
    HARNESS_SANDBOX: "docker",
    ...changes,
  };
}

async function docker(changes: Record<string, string>): Promise<CheckReport> {
  const reports = await runDoctor(env(changes), { checks: [settingsCheck(), dockerCheck()] });
  const found = reports.find((report) => report.id === "docker");
  if (!found) throw new Error("no docker check");
  return found;
}

describe("harness doctor: Docker", () => {
  it("is skipped when runs never go to Docker", async () => {
    const report = await docker({ HARNESS_SANDBOX: "local" });
    expect(report).toMatchObject({ status: "skip", detail: "not used (runs go to local)" });
  });

  it("a Docker sandbox without an image is refused by the settings, with what to set", async () => {
    const reports = await runDoctor(env({}), { checks: [settingsCheck(), dockerCheck()] });
    expect(reports[0]?.status).toBe("fail");
    expect(reports[0]?.detail).toMatch(/HARNESS_DOCKER_IMAGE is not set/);
    expect(reports[1]?.status).toBe("skip");
  });

  it("an engine that does not answer: one ✗ naming the address, and how to start one", async () => {
    const report = await docker({
      HARNESS_DOCKER_IMAGE: "acme/runner:1",
      DOCKER_HOST: "unix:///nonexistent/docker.sock",
    });
    expect(report.status).toBe("fail");
    expect(report.detail).toBe("nothing answers at unix:///nonexistent/docker.sock (ENOENT)");
    expect(report.fix).toMatch(/start the Docker Engine .* or point DOCKER_HOST at a running one/);
  });

  it.skipIf(!live)("a running engine with the image passes; an image it lacks fails with how to get it", async () => {
    const host = live?.host ?? "";
    const healthy = await docker({ HARNESS_DOCKER_IMAGE: image, DOCKER_HOST: host });
    expect(healthy.status, healthy.detail).toBe("ok");
    expect(healthy.detail).toMatch(new RegExp(`^Docker \\S+ at ${host.replace(/[/.]/g, "\\$&")}, with the image `));
    // Whether the engine remaps, as its own /info says; without, how to turn it on.
    const info = (await live?.docker.info()) as { SecurityOptions?: unknown };
    if (remapsUserNamespaces(info)) expect(healthy.detail).toContain("user namespaces remapped");
    else
      expect(healthy.detail).toContain(
        'no user-namespace remapping: a sandbox\'s uid is the same uid on the host (set "userns-remap": "default"',
      );

    const missing = await docker({ HARNESS_DOCKER_IMAGE: "harness-test/absent:never", DOCKER_HOST: host });
    expect(missing.status).toBe("fail");
    expect(missing.detail).toMatch(/has no image harness-test\/absent:never$/);
    expect(missing.fix).toContain("docker pull harness-test/absent:never");
  });

  it("tells an engine that remaps user namespaces from one that does not, from what the engine reports", () => {
    // What /info's SecurityOptions holds on an engine started with --userns-remap=default.
    const remapped = ["name=seccomp,profile=default", "name=userns"];
    expect(userNamespaces({ SecurityOptions: remapped })).toMatch(/^user namespaces remapped/);
    expect(userNamespaces({ SecurityOptions: ["name=seccomp,profile=default"] })).toMatch(
      /^no user-namespace remapping/,
    );
    expect(userNamespaces({ SecurityOptions: ["name=usernsx"] })).toMatch(/^no user-namespace remapping/);
    expect(userNamespaces({})).toMatch(/^no user-namespace remapping/);
  });
});
