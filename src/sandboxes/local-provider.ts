import { createLocalSandbox } from "../sandbox/local/sandbox.js";
import type { LocalIsolation, Sandbox } from "../sandbox/types.js";
import { InvalidInputError } from "../util/errors.js";
import type { NamedSandboxInfo, NamedSandboxProvider, NamedSandboxSpec } from "./provider.js";

interface Kept {
  sandbox: Sandbox;
  info: NamedSandboxInfo;
  base: string | undefined;
}

/**
 * Named sandboxes on this machine, isolated with bubblewrap and without a network. Their
 * commands are children of this process, so they live as long as it does: the MCP server that
 * made them keeps them for its clients, and tears them all down when it stops. Sandboxes that
 * outlive a command are Docker's.
 */
export function localSandboxProvider(options: {
  isolation: LocalIsolation;
  now?: () => Date;
}): NamedSandboxProvider & { noteState(name: string, state: "running" | "paused"): void } {
  const kept = new Map<string, Kept>();
  const now = options.now ?? (() => new Date());
  const byName = (sandbox: Sandbox): Kept | undefined => [...kept.values()].find((entry) => entry.sandbox === sandbox);
  return {
    kind: "local",
    async create(spec: NamedSandboxSpec) {
      if (spec.image !== undefined)
        throw new InvalidInputError("An image is for Docker sandboxes: the local sandbox runs this machine's programs");
      const sandbox = await createLocalSandbox({
        repo: spec.repo,
        branch: spec.branch,
        labels: spec.labels,
        network: { mode: "none" },
        localIsolation: options.isolation,
        ...(spec.githubServerUrl ? { githubServerUrl: spec.githubServerUrl } : {}),
      });
      kept.set(spec.name, {
        sandbox,
        base: undefined,
        info: {
          name: spec.name,
          provider: "local",
          state: "running",
          repo: spec.repo,
          branch: spec.branch,
          createdAt: now().toISOString(),
        },
      });
      return sandbox;
    },
    open(name) {
      return Promise.resolve(kept.get(name)?.sandbox);
    },
    list() {
      return Promise.resolve([...kept.values()].map((entry) => ({ ...entry.info })));
    },
    readBase(sandbox) {
      return Promise.resolve(byName(sandbox)?.base);
    },
    rememberBase(sandbox, base) {
      const entry = byName(sandbox);
      if (entry) entry.base = base;
      return Promise.resolve();
    },
    async remove(name) {
      const entry = kept.get(name);
      if (!entry) return false;
      kept.delete(name);
      await entry.sandbox.teardown();
      return true;
    },
    noteState(name, state) {
      const entry = kept.get(name);
      if (entry) entry.info.state = state;
    },
    async close() {
      const all = [...kept.values()];
      kept.clear();
      await Promise.all(all.map((entry) => entry.sandbox.teardown()));
    },
  };
}
