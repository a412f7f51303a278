import { describe, expect, test } from "vitest";
import { hostGid, remappingOf } from "../../src/sandbox/docker/user-namespaces.js";

// What the engine's /info says decides which host group the run's socket folders are given:
// on an engine started with `userns-remap`, the container's gid 10001 is the host's 100000 + 10001.
describe("the engine's user-namespace remapping, from /info", () => {
  test("an engine with userns-remap: the base of its subordinate range, from its data folder", () => {
    const remapped = remappingOf({
      SecurityOptions: ["name=seccomp,profile=default", "name=userns"],
      DockerRootDir: "/var/lib/docker/100000.100000",
    });
    expect(remapped).toEqual({ uidBase: 100000, gidBase: 100000 });
    expect(hostGid(10001, remapped)).toBe(110001);
  });

  test("an engine without it, or one whose answer does not say where: the container's ids are the host's", () => {
    expect(remappingOf({ SecurityOptions: ["name=seccomp,profile=default"], DockerRootDir: "/var/lib/docker" })).toBe(
      undefined,
    );
    expect(remappingOf({ SecurityOptions: ["name=userns"], DockerRootDir: "/var/lib/docker" })).toBe(undefined);
    expect(remappingOf({ SecurityOptions: "name=userns", DockerRootDir: "/x/1.1" })).toBe(undefined);
    expect(remappingOf({})).toBe(undefined);
    expect(hostGid(10001, undefined)).toBe(10001);
  });
});
