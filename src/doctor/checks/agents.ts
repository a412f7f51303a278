import { constants as fsConstants } from "node:fs";
import { access, realpath, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, isAbsolute, join, sep } from "node:path";
import { createAgent } from "../../agents/registry.js";
import { sandboxBaseEnv } from "../../sandbox/environment.js";
import { runProcess } from "../../sandbox/process.js";
import { failed, passed, skipped, type Check } from "../check.js";
import { appSettings, type DoctorContext } from "../context.js";

/** The agent a repository gets when its configuration names none: it must be installed. */
const DEFAULT_AGENT = "claude-code";
export const CLI_AGENT_NAMES = ["claude-code", "codex", "pi"] as const;

/**
 * A coding-agent CLI as the local sandbox finds it: by its program name on the PATH sandboxed
 * commands get, and, when runs are isolated, inside what the sandbox can see (/usr and the
 * operator's read-only paths). Its version is what `--version` prints. The default agent must be
 * there; another one missing is said, not failed: only repositories that choose it need it.
 */
export function agentCliCheck(name: (typeof CLI_AGENT_NAMES)[number]): Check<DoctorContext> {
  const driver = createAgent(name);
  return {
    id: `agent-${name}`,
    name: `agent CLI ${driver.program}`,
    needs: ["settings"],
    timeoutMs: 15_000,
    fixWhenStuck: () => `run \`${driver.program} --version\` by hand to see where it hangs`,
    async run(context, signal) {
      const settings = appSettings(context);
      if (!settings.allowedSandboxes.includes("local"))
        return skipped("not looked for on this host: runs go to Daytona, whose snapshot carries the CLIs");
      const path = sandboxBaseEnv(context.env)["PATH"] ?? "";
      const found = await findOnPath(driver.program, path);
      const required = name === DEFAULT_AGENT;
      if (!found) {
        const detail = `${driver.program} is not on the PATH sandboxed commands get`;
        return required
          ? failed(`${detail}; it is the default agent`, driver.installHint)
          : skipped(`not installed: only repositories choosing agent: ${name} need it`, driver.installHint);
      }
      const isolation = settings.localSandbox ?? { mode: "namespaces" };
      if (isolation.mode === "namespaces") {
        const real = await realpath(found).catch(() => found);
        const visible = ["/usr", ...(isolation.readOnlyPaths ?? [])].some((root) => within(real, root));
        if (!visible) {
          const detail = `${found}${real !== found ? ` (${real})` : ""} is outside what the isolated sandbox sees`;
          const fix =
            `install it under /usr (e.g. ${driver.installHint} with the system's npm) or add its folder ` +
            "to HARNESS_SANDBOX_READONLY_PATHS";
          return required ? failed(detail, fix) : skipped(detail, fix);
        }
      }
      const result = await runProcess({
        argv: [found, "--version"],
        cwd: tmpdir(),
        env: sandboxBaseEnv(context.env),
        timeout: 10_000,
        signal,
      });
      const said = `${result.stdout}\n${result.stderr}`.trim().split("\n")[0]?.trim() ?? "";
      if (result.exitCode !== 0) {
        const detail = `\`${found} --version\` failed (exit ${String(result.exitCode)}): ${said || "no output"}`;
        return required ? failed(detail, `reinstall it: ${driver.installHint}`) : skipped(detail, driver.installHint);
      }
      return passed(`${said || "version unknown"} at ${found}`);
    },
  };
}

/** The first executable file named `program` in `path`'s folders (absolute ones only, as a shell would trust). */
async function findOnPath(program: string, path: string): Promise<string | undefined> {
  for (const folder of path.split(delimiter)) {
    if (!isAbsolute(folder)) continue;
    const candidate = join(folder, program);
    const info = await stat(candidate).catch(() => undefined);
    if (!info?.isFile()) continue;
    if (
      await access(candidate, fsConstants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return undefined;
}

function within(path: string, root: string): boolean {
  const trimmed = root.replace(/\/+$/, "");
  return path === trimmed || path.startsWith(`${trimmed}${sep}`);
}
