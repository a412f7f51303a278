import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { probeIsolation } from "../../src/sandbox/local/isolation.js";
import { dockerSandboxProvider } from "../../src/sandboxes/docker-provider.js";
import { localSandboxProvider } from "../../src/sandboxes/local-provider.js";
import { SandboxManager } from "../../src/sandboxes/manager.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

// Named sandboxes on this machine (bubblewrap, no network), kept by the process that made them.
const probe = await probeIsolation();
if (!probe.available) console.warn(`Named local sandbox tests skipped: ${probe.reason}; fix: ${probe.fix}`);

let dir: { path: string; cleanup: () => Promise<void> };
let repo = "";

beforeAll(async () => {
  dir = await scratchDir();
  repo = await makeRepo(join(dir.path, "work"));
});
afterAll(async () => {
  await dir.cleanup();
});

function manager(allowLocalRepositories = true): SandboxManager {
  return new SandboxManager({
    providers: { local: localSandboxProvider({ isolation: { mode: "namespaces", network: "none" } }) },
    defaultProvider: "local",
    allowLocalRepositories,
    random: () => "beef",
  });
}

describe.skipIf(!probe.available)("named local sandboxes", () => {
  test("made from a repository on this machine, driven by name, and gone when the manager closes", async () => {
    const sandboxes = manager();
    const info = await sandboxes.create({ repo });
    expect(info).toMatchObject({ name: "work-beef", provider: "local", state: "running" });
    expect(info.branch).toBe("harness/sandbox/work-beef");

    await sandboxes.writeFile("work-beef", "notes/todo.txt", Buffer.from([0xff, 0x00, 0x41]));
    expect([...(await sandboxes.readFile("work-beef", "notes/todo.txt"))]).toEqual([0xff, 0x00, 0x41]);
    const ran = await sandboxes.exec("work-beef", { argv: ["sh", "-c", "echo changed >> README.md; pwd"] });
    expect(ran.exitCode).toBe(0);
    const diff = await sandboxes.diff("work-beef");
    expect(diff.text).toContain("+changed");
    expect(diff.text).toContain("notes/todo.txt");
    // Diffing staged nothing: the checkout's own index is as the command left it.
    const status = await sandboxes.exec("work-beef", { argv: ["git", "status", "--porcelain"] });
    expect(status.stdout).toContain(" M README.md");
    expect(status.stdout).toContain("?? notes/");

    await sandboxes.pause("work-beef");
    expect((await sandboxes.list()).sandboxes[0]?.state).toBe("paused");
    await expect(sandboxes.exec("work-beef", { argv: ["true"] })).rejects.toThrow(/is paused/);
    await sandboxes.resume("work-beef");
    expect((await sandboxes.exec("work-beef", { argv: ["true"] })).exitCode).toBe(0);

    await expect(sandboxes.readFile("work-beef", "../../../etc/passwd")).rejects.toThrow(/outside|confine/i);
    await expect(sandboxes.exec("work-beef", { argv: [] })).rejects.toThrow(/non-empty list of strings/);
    await expect(sandboxes.create({ repo, name: "work-beef" })).rejects.toThrow(/already exists/);

    await sandboxes.close();
    await expect(sandboxes.exec("work-beef", { argv: ["true"] })).rejects.toThrow(/No sandbox is named work-beef/);
  }, 60_000);

  test("a server that must not name its own files refuses a local path before making anything", async () => {
    const sandboxes = manager(false);
    await expect(sandboxes.create({ repo })).rejects.toThrow(/does not make sandboxes from paths on its machine/);
    expect((await sandboxes.list()).sandboxes).toEqual([]);
    await sandboxes.close();
  });

  test("a Docker Engine that is down leaves local sandboxes usable and is named where it matters", async () => {
    // Nothing listens on this socket: every call to the engine fails to connect.
    const deadEngine = `unix://${join(dir.path, "no-docker.sock")}`;
    const sandboxes = new SandboxManager({
      providers: {
        local: localSandboxProvider({ isolation: { mode: "namespaces", network: "none" } }),
        docker: dockerSandboxProvider({ host: deadEngine, image: "debian:stable" }),
      },
      defaultProvider: "local",
      allowLocalRepositories: true,
    });
    try {
      await sandboxes.create({ repo, name: "beside-docker", provider: "local" });
      expect((await sandboxes.exec("beside-docker", { argv: ["true"] })).exitCode).toBe(0);
      const listed = await sandboxes.list();
      expect(listed.sandboxes.map((entry) => entry.name)).toEqual(["beside-docker"]);
      expect(listed.unavailable).toEqual([expect.stringMatching(/^docker: .*not reachable/)]);
      // A name found nowhere reachable may be on the engine that is down: the answer says so.
      await expect(sandboxes.exec("elsewhere", { argv: ["true"] })).rejects.toThrow(
        /Docker Engine at .*no-docker\.sock is not reachable/,
      );
      await expect(sandboxes.delete("elsewhere")).rejects.toThrow(/not reachable/);
      await sandboxes.delete("beside-docker");
      await expect(sandboxes.create({ repo, name: "in-docker", provider: "docker" })).rejects.toThrow(/not reachable/);
    } finally {
      await sandboxes.close();
    }
  }, 60_000);
});
