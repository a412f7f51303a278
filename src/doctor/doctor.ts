import { createRedactor, secretsFromEnv } from "../util/redact.js";
import type { Check } from "./check.js";
import { agentCliCheck, CLI_AGENT_NAMES } from "./checks/agents.js";
import { repoCacheDiskCheck } from "./checks/disk.js";
import { githubAppCheck, installationsCheck, webhookDeliveriesCheck } from "./checks/github.js";
import { modelUpstreamsCheck } from "./checks/model-upstreams.js";
import { queueStoreCheck } from "./checks/queue-store.js";
import { daytonaCheck, dockerCheck, localSandboxCheck } from "./checks/sandbox.js";
import { settingsCheck } from "./checks/settings.js";
import { gitCheck, nodeCheck } from "./checks/tools.js";
import { createDoctorContext, type DoctorContext, type DoctorOverrides } from "./context.js";
import { runChecks, type CheckReport } from "./runner.js";

/** How long a check may take unless it says otherwise: a GitHub that does not answer is a failure, not a hang. */
export const DEFAULT_CHECK_TIMEOUT_MS = 10_000;

/** Every check, in the order they are shown; each after the checks it needs. */
export function doctorChecks(): Check<DoctorContext>[] {
  return [
    nodeCheck(),
    gitCheck(),
    settingsCheck(),
    localSandboxCheck(),
    daytonaCheck(),
    dockerCheck(),
    queueStoreCheck(),
    githubAppCheck(),
    installationsCheck(),
    webhookDeliveriesCheck(),
    ...CLI_AGENT_NAMES.map((name) => agentCliCheck(name)),
    modelUpstreamsCheck(),
    repoCacheDiskCheck(),
  ];
}

export interface DoctorOptions extends DoctorOverrides {
  checks?: readonly Check<DoctorContext>[];
  timeoutMs?: number;
  /** Each check's answer as it comes, e.g. for a server to log one line per check. */
  onReport?: (report: CheckReport) => void;
}

/**
 * Runs the doctor against this environment: the CLI's `harness doctor`, and anything else that
 * wants the same answers (a server at start). Never throws; every text is redacted of the
 * environment's secrets and the private key.
 */
export async function runDoctor(env: NodeJS.ProcessEnv, options: DoctorOptions = {}): Promise<CheckReport[]> {
  const { checks, timeoutMs, onReport, ...overrides } = options;
  const context = createDoctorContext(env, overrides);
  const privateKey =
    context.settings.ok && context.settings.settings.mode === "app" ? context.settings.settings.privateKey : undefined;
  const redact = createRedactor([...secretsFromEnv(env), privateKey]);
  return runChecks(checks ?? doctorChecks(), context, {
    timeoutMs: timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS,
    redact,
    ...(onReport ? { onReport } : {}),
  });
}
