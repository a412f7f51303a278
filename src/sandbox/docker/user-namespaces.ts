import type Docker from "dockerode";

/** Where an engine that remaps user namespaces puts a container's ids on the host. */
export interface RemappedIds {
  /** Host uid of the container's uid 0; the container's uid N is this plus N. */
  uidBase: number;
  /** Host gid of the container's gid 0. */
  gidBase: number;
}

const known = new Map<string, Promise<RemappedIds | undefined>>();

/**
 * The engine's user-namespace remapping, if it has one: an engine started with `userns-remap`
 * keeps its data under `<data-root>/<uid>.<gid>`, the host ids of the container's root, and says
 * `name=userns` among its security options. Asked once per engine; an engine that cannot be
 * asked is taken as not remapping, which only matters for the run's socket folders (below).
 */
export function remappedIds(client: Docker, host: string): Promise<RemappedIds | undefined> {
  let found = known.get(host);
  if (!found) {
    found = client.info().then(remappingOf, () => undefined);
    // A failed look is not kept: the next sandbox asks again.
    void found.then((ids) => {
      if (ids === undefined) known.delete(host);
    });
    known.set(host, found);
  }
  return found;
}

/** Whether the engine's /info says it remaps user namespaces (`name=userns` among its security options). */
export function remapsUserNamespaces(info: { SecurityOptions?: unknown }): boolean {
  const options = Array.isArray(info.SecurityOptions) ? info.SecurityOptions : [];
  return options.some((option) => typeof option === "string" && /(^|,)name=userns(,|$)/.test(option));
}

export function remappingOf(info: { SecurityOptions?: unknown; DockerRootDir?: unknown }): RemappedIds | undefined {
  if (!remapsUserNamespaces(info)) return undefined;
  const match = typeof info.DockerRootDir === "string" ? /\/(\d+)\.(\d+)\/?$/.exec(info.DockerRootDir) : null;
  if (!match) return undefined;
  return { uidBase: Number(match[1]), gidBase: Number(match[2]) };
}

/** The host gid that a container's gid is on this engine. */
export function hostGid(gid: number, remapped: RemappedIds | undefined): number {
  return remapped ? remapped.gidBase + gid : gid;
}
