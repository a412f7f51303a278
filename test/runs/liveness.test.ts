import { spawn } from "node:child_process";
import { describe, expect, test } from "vitest";
import {
  judgeOwner,
  machineProbes,
  ownProof,
  parseStat,
  readProof,
  type LivenessProbes,
  type OwnerProof,
  type ProcessStat,
} from "../../src/runs/queue/liveness.js";

/** One machine as the probes see it: its processes by pid, and which lock files are held. */
interface FakeMachine {
  host: string;
  boot: string | undefined;
  processes: Map<number, ProcessStat>;
  locks?: Map<string, boolean>;
}

function probesOf(
  machine: FakeMachine,
  self: { pid: number; pidNamespace?: string; uid?: number; selfPid?: number },
): LivenessProbes {
  return {
    hostname: () => machine.host,
    bootId: () => machine.boot,
    pidNamespace: () => self.pidNamespace ?? "pid:[4026531836]",
    uid: () => self.uid ?? 1000,
    pid: () => self.pid,
    stat: (pid) => machine.processes.get(pid === "self" ? (self.selfPid ?? self.pid) : pid),
    lockFree: (name) => {
      const held = machine.locks?.get(name);
      return held === undefined ? undefined : !held;
    },
  };
}

function machine(overrides: Partial<FakeMachine> = {}): FakeMachine {
  return {
    host: "worker-1",
    boot: "b6f1c1e2-0000-4000-8000-000000000001",
    processes: new Map([
      [100, { pid: 100, start: 5_000, state: "S" }],
      [200, { pid: 200, start: 9_000, state: "S" }],
    ]),
    ...overrides,
  };
}

/** The proof pid 100 recorded when it claimed. */
function ownerOn(host: FakeMachine, extra: Partial<OwnerProof> = {}): OwnerProof {
  const proof = ownProof(probesOf(host, { pid: 100 }));
  if (!proof) throw new Error("no proof");
  return { ...proof, ...extra };
}

describe("liveness proof: whether a claim's owner is provably gone", () => {
  test("a process records its host, boot, pid namespace, user, pid and start time", () => {
    const host = machine();
    expect(ownProof(probesOf(host, { pid: 100 }), "0123456789abcdef.lock")).toEqual({
      host: "worker-1",
      boot: "b6f1c1e2-0000-4000-8000-000000000001",
      pidNamespace: "pid:[4026531836]",
      uid: 1000,
      pid: 100,
      start: 5_000,
      lock: "0123456789abcdef.lock",
    });
  });

  test("a pid that no longer exists is dead", () => {
    const host = machine();
    const owner = ownerOn(host);
    host.processes.delete(100);
    const here = ownProof(probesOf(host, { pid: 200 }));
    expect(judgeOwner(owner, here, probesOf(host, { pid: 200 }))).toEqual({
      owner: "dead",
      why: "pid 100 is gone",
    });
  });

  test("a pid still running with the recorded start time is alive", () => {
    const host = machine();
    const owner = ownerOn(host);
    const here = ownProof(probesOf(host, { pid: 200 }));
    expect(judgeOwner(owner, here, probesOf(host, { pid: 200 })).owner).toBe("alive");
  });

  test("a pid reused by a process started later is dead; one that has exited (zombie) is dead", () => {
    const host = machine();
    const owner = ownerOn(host);
    const probes = probesOf(host, { pid: 200 });
    const here = ownProof(probes);
    host.processes.set(100, { pid: 100, start: 12_000, state: "S" });
    expect(judgeOwner(owner, here, probes)).toEqual({
      owner: "dead",
      why: "pid 100 now names a process started later",
    });
    host.processes.set(100, { pid: 100, start: 5_000, state: "Z" });
    expect(judgeOwner(owner, here, probes).owner).toBe("dead");
  });

  test("a pid naming a process older than the claimant proves nothing", () => {
    const host = machine();
    const owner = ownerOn(host);
    const probes = probesOf(host, { pid: 200 });
    host.processes.set(100, { pid: 100, start: 10, state: "S" });
    expect(judgeOwner(owner, ownProof(probes), probes).owner).toBe("unknown");
  });

  test("an owner on another host is left to its lease, even when the pid is free here", () => {
    const owner = ownerOn(machine({ host: "worker-2" }));
    const host = machine({ processes: new Map([[200, { pid: 200, start: 9_000, state: "S" }]]) });
    const probes = probesOf(host, { pid: 200 });
    expect(judgeOwner(owner, ownProof(probes), probes)).toEqual({
      owner: "unknown",
      why: "it ran on another host (worker-2)",
    });
  });

  test("an owner from another boot is left to its lease", () => {
    const owner = ownerOn(machine({ boot: "b6f1c1e2-0000-4000-8000-0000000000ff" }));
    const host = machine();
    host.processes.delete(100);
    const probes = probesOf(host, { pid: 200 });
    expect(judgeOwner(owner, ownProof(probes), probes).owner).toBe("unknown");
  });

  test("without a boot id nothing is recorded and nothing is provably dead", () => {
    const bootless = machine({ boot: undefined });
    expect(ownProof(probesOf(bootless, { pid: 100 }))).toBeUndefined();
    const withBoot = machine();
    const owner = ownerOn(withBoot);
    withBoot.processes.delete(100);
    // Neither a claim without proof, nor a judge without a boot id, concludes anything.
    expect(
      judgeOwner(undefined, ownProof(probesOf(withBoot, { pid: 200 })), probesOf(withBoot, { pid: 200 })).owner,
    ).toBe("unknown");
    expect(judgeOwner(owner, ownProof(probesOf(bootless, { pid: 200 })), probesOf(bootless, { pid: 200 })).owner).toBe(
      "unknown",
    );
  });

  test("a /proc that shows another pid namespace gives no proof (our pid there is someone else)", () => {
    expect(ownProof(probesOf(machine(), { pid: 100, selfPid: 200 }))).toBeUndefined();
  });

  test("an owner in another pid namespace is judged by its lock file, never by its pid", () => {
    const host = machine({ locks: new Map([["0123456789abcdef.lock", true]]) });
    const owner = { ...ownerOn(host), pidNamespace: "pid:[4026532178]", lock: "0123456789abcdef.lock" };
    // Its pid means nothing here: pid 100 in our namespace is gone, yet the owner lives.
    host.processes.delete(100);
    const probes = probesOf(host, { pid: 200 });
    const here = ownProof(probes);
    expect(judgeOwner(owner, here, probes)).toEqual({ owner: "alive", why: "its lock file is held" });
    host.locks?.set("0123456789abcdef.lock", false);
    expect(judgeOwner(owner, here, probes)).toEqual({
      owner: "unknown",
      why: "its lock file is free, which is not yet taken as proof",
    });
    host.locks?.delete("0123456789abcdef.lock");
    expect(judgeOwner(owner, here, probes).owner).toBe("unknown");
    expect(judgeOwner({ ...owner, lock: undefined } as unknown as OwnerProof, here, probes).owner).toBe("unknown");
  });

  test("another user's process may be hidden, so its pid proves nothing either", () => {
    const host = machine();
    const owner = { ...ownerOn(host), uid: 0 };
    host.processes.delete(100);
    const probes = probesOf(host, { pid: 200 });
    expect(judgeOwner(owner, ownProof(probes), probes).owner).toBe("unknown");
  });

  test("a probe that fails concludes nothing", () => {
    const host = machine();
    const owner = ownerOn(host);
    const probes = probesOf(host, { pid: 200 });
    const here = ownProof(probes);
    const failing: LivenessProbes = {
      ...probes,
      stat: (pid) => {
        if (pid === 100) throw Object.assign(new Error("permission denied"), { code: "EACCES" });
        return probes.stat(pid);
      },
    };
    expect(judgeOwner(owner, here, failing)).toMatchObject({ owner: "unknown" });
  });

  test("/proc/<pid>/stat is read past a command name holding spaces and parentheses", () => {
    const line =
      "4242 (node (worker) x) S 1 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 11 0 987654 1000 10 " +
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
    expect(parseStat(line)).toEqual({ pid: 4242, start: 987_654, state: "S" });
    expect(() => parseStat("garbage")).toThrow(/Unreadable/);
  });

  test("a proof read back from the store: malformed text counts as none", () => {
    const proof = ownerOn(machine());
    expect(readProof(JSON.stringify(proof))).toEqual(proof);
    expect(readProof(null)).toBeUndefined();
    expect(readProof("{not json")).toBeUndefined();
    expect(readProof(JSON.stringify({ ...proof, pid: "100" }))).toBeUndefined();
  });
});

describe("liveness proof on this machine's /proc", () => {
  test("this process proves itself alive; a child is alive until SIGKILLed, then dead", async () => {
    const probes = machineProbes();
    const here = ownProof(probes);
    // Linux is where the tests run; elsewhere there is no boot id and this would be undefined.
    expect(here).toMatchObject({ pid: process.pid });
    expect(judgeOwner(here, here, probes).owner).toBe("alive");

    const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    const pid = child.pid ?? 0;
    const started = probes.stat(pid);
    expect(started?.pid).toBe(pid);
    const owner: OwnerProof = { ...here!, pid, start: started!.start };
    expect(judgeOwner(owner, here, probes).owner).toBe("alive");
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    expect(judgeOwner(owner, here, probes).owner).toBe("dead");
    // The same pid with a different recorded start (a pid reused since) is dead as well.
    expect(judgeOwner({ ...here!, start: here!.start - 1 }, here, probes).owner).toBe("dead");
  });
});
