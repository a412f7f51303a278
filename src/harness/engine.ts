import { randomBytes } from "node:crypto";
import { totalTokens, type ExecResult, type NodeReport, type NodeStatus, type RunStatus } from "../contracts/types.js";
import { DEFAULT_PRICES, type PriceTable } from "../agents/prices.js";
import type { AgentDriver, AgentOutcome, UsageMeter } from "../agents/types.js";
import { EXIT_NOT_FOUND } from "../sandbox/process.js";
import type { Sandbox } from "../sandbox/types.js";
import { DEFAULT_OPERATION_TIMEOUT } from "../sandbox/types.js";
import type { Redactor } from "../util/redact.js";
import { TailBuffer } from "../util/tail-buffer.js";
import type { AgentNode, Blueprint, BlueprintNode, ExecNode } from "./blueprint.js";
import type { Reporter } from "../contracts/events.js";
import { budgetStop, RunSpend, stepCost } from "./cost-budget.js";
import type { BudgetStop } from "../gateway/model-gateway.js";
import { scratchDirName } from "./git-steps.js";
import { OutputLog } from "./output-log.js";
import { renderAgentPrompt, type PromptInputs } from "./prompt.js";
import { renderTemplate } from "./template.js";
import { MAX_SESSION_RECORD_BYTES, SessionKeeper } from "./session-keeper.js";
import { planResume, type SessionToResume } from "./session-resume.js";
import type { SessionStore } from "./session-store.js";
import { createRedactor } from "../util/redact.js";
import { describeError } from "../util/errors.js";

/** Why a run was stopped from outside its steps. */
export type StopReason = "budget" | "cancelled";

/** Bytes of a node's output kept for live tails and reports. */
const OUTPUT_TAIL_BYTES = 4 * 1024;
/**
 * Output kept from an agent process for its driver to parse. JSON-lines agents (codex, pi) report
 * turns and cost as events spread over the whole run, so they need more than a command's tail.
 */
const AGENT_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Bytes of a failing node's output handed to the fix agent as `{{failure.output}}`. */
const FAILURE_OUTPUT_BYTES = 8 * 1024;

export interface BlueprintRun {
  blueprint: Blueprint;
  sandbox: Sandbox;
  runId: string;
  reporter: Reporter;
  redactor: Redactor;
  /**
   * Masks what is kept of an agent's session: the run's known secrets and token shapes, without
   * the guesses after secret-sounding names that `redactor` also makes (default: `redactor`).
   */
  recordMask?: Redactor;
  signal: AbortSignal;
  stopReason: () => StopReason | undefined;
  /** Epoch ms by which the whole run must end. */
  deadline: number;
  now: () => Date;
  promptInputs: PromptInputs;
  agent?: AgentDriver;
  agentCredentials: Record<string, string>;
  /**
   * Harness's model gateway for this run: fresh run tokens for each agent step (added to
   * `agentCredentials`), and the budget as the gateway measures it, where the money is spent.
   * Without it the budget is held from what the CLI reports.
   */
  gateway?: {
    credentials: () => Promise<Record<string, string>>;
    /** Aborted when the gateway refused or cut one of the run's calls for a budget. */
    signal: AbortSignal;
    reached: () => BudgetStop | undefined;
    /** Whether a budget of the run is spent, asked of the spend store itself. */
    check?: () => Promise<BudgetStop | undefined>;
  };
  /** Setup secrets by name, for exec steps that ask for them; never given to agent steps. */
  setupSecrets?: Readonly<Record<string, string>>;
  maxAgentTurns?: number;
  model?: string;
  /** Prices for agent steps whose CLI reports no cost (default: `DEFAULT_PRICES`). */
  prices?: PriceTable;
  /**
   * The run's budget for its agents, in US dollars: an agent step is stopped when the run's
   * spend reaches it, and no agent step starts after that.
   */
  maxCostUsd?: number;
  outputThrottleMs: number;
  /** When set, every output line is also emitted as `node.log` events, batched at this interval. */
  outputLogMs?: number;
  /** Where agent steps' own session records are kept; without it the CLIs keep none. */
  sessions?: RunSessions;
  /**
   * The node to start at, leaving out the main nodes before it: a run continued in the sandbox
   * it paused in goes on where it stopped. A node run only on failure starts at the node it repairs.
   */
  startAt?: string;
}

/** How a run keeps its agent CLIs' session records (see `session-keeper.ts`). */
export interface RunSessions {
  store: SessionStore;
  /** The pull request the run works on, when it works on one already. */
  pullRequestUrl?: string;
  /** The heartbeat's scheduler and interval, and the bound on a record (defaults: a timer, 5 s, 8 MiB). */
  every?: (intervalMs: number, tick: () => Promise<void>) => () => void;
  intervalMs?: number;
  maxBytes?: number;
  /** A kept session the run's first agent step continues instead of starting a fresh agent. */
  resume?: SessionToResume;
}

export interface BlueprintOutcome {
  status: RunStatus;
  nodes: NodeReport[];
  error?: string;
  /**
   * The run failed because Harness stopped an agent step at the cost budget or the turn cap (or
   * kept one from starting, the budget being spent): the agent did not fail, so its work so far
   * is worth keeping.
   */
  stoppedAtLimit?: true;
  /** Which agent step the run's money budget stopped (or kept from starting), and at what spend. */
  stoppedAtBudget?: BudgetStopAt;
}

export interface BudgetStopAt {
  nodeId: string;
  limitUsd: number;
  spentUsd: number;
}

interface Execution {
  report: NodeReport;
  /** Redacted tail of the node's output, for a retry target's `{{failure.output}}`. */
  failureOutput: string;
  /** Harness stopped the step at the cost budget or the turn cap, or did not start it, the budget spent. */
  stoppedAtLimit: boolean;
  /** The money budget is what stopped the step, or kept it from starting. */
  budget?: BudgetStopAt;
}

/** An agent step not started because the run's budget is spent. */
class BudgetSpentError extends Error {
  constructor(
    readonly limitUsd: number,
    readonly spentUsd: number,
  ) {
    super(budgetStop(limitUsd, spentUsd));
  }
}

/** What a run's steps share. */
interface RunScope {
  /** The prompts' fence marker, made new for each prompt from this. */
  nonce: string;
  spend: RunSpend;
  /** The kept session still to be continued, until an agent step takes it. */
  resume: SessionToResume | undefined;
}

/**
 * Runs a blueprint's nodes in order. A failing node with `onFailure` runs its retry target
 * (e.g. `fix`) and then itself again, at most `maxAttempts` times in all; `on-failure` nodes
 * run only that way. The first failure that is not allowed ends the blueprint.
 */
export async function runBlueprint(run: BlueprintRun): Promise<BlueprintOutcome> {
  const reports: NodeReport[] = [];
  const attempts = new Map<string, number>();
  const byId = new Map(run.blueprint.nodes.map((node) => [node.id, node]));
  const nonce = randomBytes(6).toString("hex");
  const spend = new RunSpend({
    prices: run.prices ?? DEFAULT_PRICES,
    ...(run.maxCostUsd !== undefined ? { limitUsd: run.maxCostUsd } : {}),
    notice: (text) => {
      run.reporter.emit({ type: "run.notice", runId: run.runId, text, at: run.now().toISOString() });
    },
  });

  // Only the run's first agent step continues a kept session; the steps after it start afresh.
  const scope: RunScope = { nonce, spend, resume: run.sessions?.resume };
  const execute = async (node: BlueprintNode, failureOutput?: string): Promise<Execution> => {
    const attempt = (attempts.get(node.id) ?? 0) + 1;
    attempts.set(node.id, attempt);
    const execution = await executeNode(run, node, attempt, scope, failureOutput);
    reports.push(execution.report);
    return execution;
  };

  const stopped = (): BlueprintOutcome | undefined => {
    const reason = run.stopReason();
    if (!reason) return undefined;
    return {
      status: reason === "budget" ? "timed_out" : "cancelled",
      nodes: reports,
      error: reason === "budget" ? "The run exceeded its time budget" : "The run was cancelled",
    };
  };

  const first = startIndex(run.blueprint, run.startAt);
  for (const node of run.blueprint.nodes.slice(first)) {
    if (node.runs === "on-failure") continue;
    const early = stopped();
    if (early) return early;

    let execution = await execute(node);
    while (
      execution.report.status === "failed" &&
      node.onFailure &&
      (attempts.get(node.id) ?? 0) < node.onFailure.maxAttempts &&
      !stopped()
    ) {
      const target = byId.get(node.onFailure.retry);
      if (target && target.id !== node.id) {
        const repair = await execute(target, execution.failureOutput);
        if (repair.report.status !== "succeeded" && !target.allowFailure) {
          return (
            stopped() ?? {
              status: "failed",
              nodes: reports,
              error: `${target.title} failed: ${repair.report.error ?? repair.report.status}`,
              ...(repair.stoppedAtLimit ? { stoppedAtLimit: true } : {}),
              ...(repair.budget ? { stoppedAtBudget: repair.budget } : {}),
            }
          );
        }
      }
      if (stopped()) break;
      execution = await execute(node);
    }

    const halted = stopped();
    if (halted) return halted;
    const { report } = execution;
    if (report.status !== "succeeded" && !node.allowFailure) {
      const tries = attempts.get(node.id) ?? 1;
      const suffix = tries > 1 ? ` after ${String(tries)} attempts` : "";
      return {
        status: "failed",
        nodes: reports,
        error: `${node.title} failed${suffix}: ${report.error ?? report.status}`,
        ...(execution.stoppedAtLimit ? { stoppedAtLimit: true } : {}),
        ...(execution.budget ? { stoppedAtBudget: execution.budget } : {}),
      };
    }
  }
  return { status: "succeeded", nodes: reports };
}

/** Where a run that starts at `nodeId` begins: that node, or the main node an on-failure node repairs. */
function startIndex(blueprint: Blueprint, nodeId: string | undefined): number {
  if (nodeId === undefined) return 0;
  const node = blueprint.nodes.find((candidate) => candidate.id === nodeId);
  const from =
    node?.runs === "on-failure"
      ? blueprint.nodes.find((candidate) => candidate.onFailure?.retry === node.id && candidate.runs !== "on-failure")
      : node;
  const index = from ? blueprint.nodes.indexOf(from) : -1;
  return index < 0 ? 0 : index;
}

async function executeNode(
  run: BlueprintRun,
  node: BlueprintNode,
  attempt: number,
  scope: RunScope,
  failureOutput?: string,
): Promise<Execution> {
  const { spend } = scope;
  const started = run.now();
  run.reporter.emit({
    type: "node.started",
    runId: run.runId,
    nodeId: node.id,
    title: node.title,
    kind: node.kind,
    attempt,
    at: started.toISOString(),
  });

  const tail = new TailBuffer(OUTPUT_TAIL_BYTES);
  const failureTail = new TailBuffer(FAILURE_OUTPUT_BYTES);
  const throttle = outputThrottle(run, node.id, attempt, () => readableTail(tail, run.redactor));
  const log =
    run.outputLogMs !== undefined
      ? new OutputLog({
          intervalMs: run.outputLogMs,
          redactor: run.redactor,
          emit: (text) => {
            run.reporter.emit({
              type: "node.log",
              runId: run.runId,
              nodeId: node.id,
              attempt,
              text,
              at: run.now().toISOString(),
            });
          },
        })
      : undefined;
  const onOutput = (stream: "stdout" | "stderr", chunk: string): void => {
    const bytes = Buffer.from(chunk, "utf8");
    tail.push(bytes);
    failureTail.push(bytes);
    throttle.poke();
    log?.push(stream, chunk);
  };

  const remaining = Math.max(1, run.deadline - Date.now());
  const nodeTimeout =
    node.timeoutMinutes !== undefined
      ? node.timeoutMinutes * 60_000
      : node.kind === "exec"
        ? DEFAULT_OPERATION_TIMEOUT
        : remaining;
  const timeout = Math.max(1, Math.min(nodeTimeout, remaining));

  let status: NodeStatus;
  let result: ExecResult | undefined;
  let agentOutcome: AgentOutcome | undefined;
  let meter: UsageMeter | undefined;
  let error: string | undefined;
  let stoppedAtLimit = false;
  let budget: BudgetStopAt | undefined;
  try {
    if (node.kind === "exec") {
      result = await runExecNode(run, node, timeout, onOutput);
    } else {
      ({
        result,
        outcome: agentOutcome,
        meter,
      } = await runAgentNode(run, node, attempt, scope, timeout, onOutput, failureOutput));
    }
    ({ status, error } = judge(run, node, result, agentOutcome));
    stoppedAtLimit = agentOutcome?.stoppedAtTurnCap !== undefined || agentOutcome?.stoppedAtBudget !== undefined;
    if (agentOutcome?.stoppedAtBudget) budget = { nodeId: node.id, ...agentOutcome.stoppedAtBudget };
  } catch (caught) {
    status = run.stopReason() === "budget" ? "timed_out" : run.stopReason() === "cancelled" ? "cancelled" : "failed";
    stoppedAtLimit = caught instanceof BudgetSpentError && status === "failed";
    if (stoppedAtLimit && caught instanceof BudgetSpentError)
      budget = { nodeId: node.id, limitUsd: caught.limitUsd, spentUsd: caught.spentUsd };
    error = caught instanceof Error ? caught.message : String(caught);
  } finally {
    throttle.stop();
    log?.stop();
  }

  const finished = run.now();
  const outputTail = readableTail(tail, run.redactor);
  // A step the harness stopped printed no final usage: what the live events said stands in.
  const tokens = agentOutcome?.tokens ?? (meter && totalTokens(meter.tokens) > 0 ? meter.tokens : undefined);
  const cost =
    node.kind === "agent"
      ? stepCost(agentOutcome?.costUsd ?? meter?.costUsd, tokens, meter?.model ?? run.model, spend.prices)
      : undefined;
  spend.add(cost);
  const report: NodeReport = {
    nodeId: node.id,
    title: node.title,
    kind: node.kind,
    attempt,
    status,
    ...(result ? { exitCode: result.exitCode } : {}),
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    durationMs: result?.durationMs ?? finished.getTime() - started.getTime(),
    ...(outputTail ? { outputTail } : {}),
    ...(agentOutcome?.summary ? { summary: run.redactor(summaryTail(agentOutcome.summary)) } : {}),
    ...(agentOutcome?.turns !== undefined ? { turns: agentOutcome.turns } : {}),
    ...(cost ? { costUsd: cost.usd } : {}),
    ...(cost?.estimated ? { costEstimated: true } : {}),
    ...(tokens ? { tokens } : {}),
    ...(node.kind === "agent" && run.agent ? { agent: run.agent.name } : {}),
    ...(node.kind === "agent" && run.model !== undefined ? { model: run.model } : {}),
    ...(error ? { error: run.redactor(error) } : {}),
  };
  run.reporter.emit({ type: "node.finished", runId: run.runId, report, at: finished.toISOString() });
  return {
    report,
    failureOutput: readableTail(failureTail, run.redactor),
    stoppedAtLimit,
    ...(budget ? { budget } : {}),
  };
}

function templateValues(run: BlueprintRun): Record<string, string> {
  const inputs = run.promptInputs;
  return {
    intent: inputs.intent,
    repo: inputs.repo,
    branch: inputs.branch,
    ...(inputs.issue
      ? {
          "issue.title": inputs.issue.title,
          "issue.body": inputs.issue.body,
          "issue.number": String(inputs.issue.number),
        }
      : {}),
  };
}

async function runExecNode(
  run: BlueprintRun,
  node: ExecNode,
  timeout: number,
  onOutput: (stream: "stdout" | "stderr", chunk: string) => void,
): Promise<ExecResult> {
  const values = templateValues(run);
  const secrets = secretEnv(run, node);
  return run.sandbox.exec({
    argv: node.argv.map((arg) => renderTemplate(arg, values)),
    cwd: run.sandbox.workDir,
    timeout,
    ...(secrets ? { env: secrets } : {}),
    signal: run.signal,
    onOutput,
  });
}

/** The secrets an exec step asked for; one the run was not given fails the step, saying how to fix it. */
function secretEnv(run: BlueprintRun, node: ExecNode): Record<string, string> | undefined {
  if (!node.secrets?.length) return undefined;
  const env: Record<string, string> = {};
  for (const name of node.secrets) {
    const value = run.setupSecrets?.[name];
    if (value === undefined)
      throw new Error(
        `Step "${node.title}" asks for the setup secret ${name}, which this run was not given: ` +
          `an operator declares it for the repository (HARNESS_SETUP_SECRETS) ` +
          `and sets its value in Harness's environment`,
      );
    env[name] = value;
  }
  return env;
}

type AgentRun = { result: ExecResult; outcome?: AgentOutcome; meter?: UsageMeter };

/** A kept session the step is continuing: its record is already in `sessionDir`. */
interface Continuing {
  sessionId: string;
  sessionDir: string;
  sameCheckout: boolean;
}

async function runAgentNode(
  run: BlueprintRun,
  node: AgentNode,
  attempt: number,
  scope: RunScope,
  timeout: number,
  onOutput: (stream: "stdout" | "stderr", chunk: string) => void,
  failureOutput?: string,
): Promise<AgentRun> {
  const agent = run.agent;
  if (!agent) throw new Error(`No agent is configured for the agent step "${node.title}"`);
  // The budget is spent: the step does not start.
  const reached = run.gateway?.reached();
  if (reached) throw new BudgetSpentError(reached.limitUsd, reached.spentUsd);
  const { spend } = scope;
  if (!run.gateway && spend.limitUsd !== undefined && spend.stopReason() !== undefined)
    throw new BudgetSpentError(spend.limitUsd, spend.spentUsd);
  const step = { run, node, attempt, scope, agent, onOutput, failureOutput };
  const resume = scope.resume;
  scope.resume = undefined;
  if (resume === undefined || !run.sessions) return runAgentProcess(step, timeout, undefined);

  const started = Date.now();
  const continued = await continueSession(step, resume, timeout);
  if ("result" in continued) return continued;
  notice(
    run,
    `The ${agent.name} agent's session from ${resume.from} could not be continued (${continued.fallback}): ` +
      `a fresh agent was started instead.`,
  );
  return runAgentProcess(step, Math.max(1, timeout - (Date.now() - started)), undefined);
}

interface AgentStep {
  run: BlueprintRun;
  node: AgentNode;
  attempt: number;
  scope: RunScope;
  agent: AgentDriver;
  onOutput: (stream: "stdout" | "stderr", chunk: string) => void;
  failureOutput: string | undefined;
}

/**
 * Puts the kept session's record where the CLI looks for it and runs the agent continuing it.
 * Says why not, and runs nothing, when the record is unusable; and when the CLI itself could not
 * load it, what it said.
 */
async function continueSession(
  step: AgentStep,
  resume: SessionToResume,
  timeout: number,
): Promise<AgentRun | { fallback: string }> {
  const { run, agent } = step;
  const sessionDir = await makeSessionDir(run);
  if (sessionDir === undefined) return { fallback: "no folder for it could be made in the sandbox" };
  const plan = planResume(
    resume,
    agent,
    { sessionDir, workDir: run.sandbox.workDir },
    run.sessions?.maxBytes ?? MAX_SESSION_RECORD_BYTES,
  );
  if (!plan.resume) return { fallback: plan.reason };
  try {
    await run.sandbox.uploadFiles([{ path: plan.path.slice(run.sandbox.workDir.length + 1), content: plan.content }]);
  } catch (error) {
    return { fallback: `its record could not be put in the sandbox: ${run.redactor(describeError(error))}` };
  }
  notice(run, `Continuing the ${agent.name} agent's session from ${resume.from}.`);
  const ran = await runAgentProcess(step, timeout, {
    sessionId: plan.sessionId,
    sessionDir,
    sameCheckout: resume.sameCheckout === true,
  });
  if ("refused" in ran) return { fallback: `the ${agent.name} CLI could not load it: ${run.redactor(ran.refused)}` };
  return ran;
}

function notice(run: BlueprintRun, text: string): void {
  run.reporter.emit({ type: "run.notice", runId: run.runId, text, at: run.now().toISOString() });
}

/** What the agent is told as it continues its session, before the request. */
function continuingNote(branch: string, sameCheckout: boolean): string {
  return sameCheckout
    ? "You are continuing your earlier session on this task, in a checkout that holds your work so far."
    : `You are continuing your earlier session on this task, in a new checkout of ${branch}: ` +
        "changes you made before are in it only if Harness committed them, so look (git status, git log) " +
        "before you go on.";
}

async function runAgentProcess(
  step: AgentStep,
  timeout: number,
  continuing: Continuing | undefined,
): Promise<AgentRun | (AgentRun & { refused: string })> {
  const { run, node, attempt, scope, agent, onOutput, failureOutput } = step;
  const { spend } = scope;
  // A fresh nonce per prompt: one a tool could have read from an earlier prompt is no use.
  const prompt = renderAgentPrompt(
    node.prompt,
    {
      ...run.promptInputs,
      ...(failureOutput !== undefined ? { failureOutput } : {}),
      ...(continuing ? { continuing: continuingNote(run.promptInputs.branch, continuing.sameCheckout) } : {}),
    },
    `${scope.nonce}${randomBytes(4).toString("hex")}`,
  );
  // Outside the checkout: a script the run executes there could otherwise read the nonce, and
  // the prompt (which may quote the issue) could end up in the commit.
  const promptName = `prompt-${node.id}-${String(attempt)}.md`;
  const promptFile = await run.sandbox.writeScratchFile(promptName, prompt);
  const notJson = agent.liveOutput === "json-lines" ? new NotJsonLines() : undefined;
  let keeper: SessionKeeper | undefined;
  try {
    // Only for CLIs that keep one: the folder costs a command in the sandbox.
    const sessionDir =
      continuing?.sessionDir ?? (run.sessions && agent.sessionFacts ? await makeSessionDir(run) : undefined);
    const credentials = run.gateway
      ? { ...run.agentCredentials, ...(await run.gateway.credentials()) }
      : run.agentCredentials;
    const invocation = agent.buildInvocation(
      {
        prompt,
        workDir: run.sandbox.workDir,
        promptFile,
        ...(run.maxAgentTurns !== undefined ? { maxTurns: run.maxAgentTurns } : {}),
        ...(run.model !== undefined ? { model: run.model } : {}),
        ...(sessionDir !== undefined ? { sessionDir } : {}),
        ...(continuing ? { resume: { sessionId: continuing.sessionId } } : {}),
      },
      credentials,
    );
    if (run.sessions && invocation.session) {
      // The step's own tokens too: the run's redactor was made before they were minted.
      const stepSecrets = createRedactor(Object.values(credentials), { assignments: false });
      keeper = new SessionKeeper({
        sandbox: run.sandbox,
        store: run.sessions.store,
        runId: run.runId,
        nodeId: node.id,
        attempt,
        agent: agent.name,
        location: invocation.session,
        facts: agent.sessionFacts ? (line) => agent.sessionFacts?.(line) : undefined,
        mask: (text) => stepSecrets((run.recordMask ?? run.redactor)(text)),
        now: run.now,
        ...(run.sessions.every ? { every: run.sessions.every } : {}),
        ...(run.sessions.intervalMs !== undefined ? { intervalMs: run.sessions.intervalMs } : {}),
        ...(run.sessions.maxBytes !== undefined ? { maxBytes: run.sessions.maxBytes } : {}),
        pullRequestUrl: run.sessions.pullRequestUrl,
        log: (text) => {
          run.reporter.emit({ type: "run.notice", runId: run.runId, text, at: run.now().toISOString(), quiet: true });
        },
      });
      keeper.start();
    }
    const sessionLines = keeper;
    // A CLI without a turn cap of its own is stopped by Harness as it begins a turn beyond it.
    const cap = run.maxAgentTurns;
    const counter = cap !== undefined ? agent.turnCounter?.() : undefined;
    const capped = new AbortController();
    // Every step is metered, for its cost; only a run with a budget is stopped by it.
    const meter = agent.usageMeter?.();
    // Through the gateway the CLI's own account of its cost is for display only.
    if (!meter && !run.gateway) spend.unenforced(`the ${agent.name} agent reports no usage`);
    const overBudget = new AbortController();
    let stoppedAt: number | undefined;
    const progress = agent.describeProgress ? progressEmitter(run, node.id, attempt) : undefined;
    const lines =
      counter || progress || meter || notJson || sessionLines
        ? lineSplitter((line) => {
            notJson?.line(line);
            sessionLines?.line(line);
            if (counter) {
              counter.line(line);
              if (cap !== undefined && counter.started > cap && !capped.signal.aborted) capped.abort();
            }
            if (meter) {
              meter.line(line);
              const live = spend.limitUsd !== undefined && !run.gateway ? spend.live(meter, run.model) : undefined;
              if (live !== undefined && spend.stopReason(live) !== undefined && !overBudget.signal.aborted) {
                stoppedAt = live;
                overBudget.abort();
              }
            }
            const activity = progress ? agent.describeProgress?.(line) : undefined;
            if (activity !== undefined) progress?.(activity);
          })
        : undefined;
    const stops = [
      run.signal,
      ...(counter ? [capped.signal] : []),
      ...(meter ? [overBudget.signal] : []),
      ...(run.gateway ? [run.gateway.signal] : []),
    ];
    const result = await run.sandbox.exec({
      argv: invocation.argv,
      cwd: run.sandbox.workDir,
      timeout,
      env: invocation.env,
      maxOutput: AGENT_OUTPUT_BYTES,
      signal: stops.length > 1 ? AbortSignal.any(stops) : run.signal,
      onOutput: lines
        ? (stream, chunk) => {
            onOutput(stream, chunk);
            if (stream === "stdout") lines(chunk);
          }
        : onOutput,
      ...(invocation.stdin !== undefined ? { stdin: invocation.stdin } : {}),
    });
    if (result.exitCode === EXIT_NOT_FOUND && /not found/i.test(result.stderr)) {
      return { result, ...(meter ? { meter } : {}) };
    }
    const refused = continuing && !run.signal.aborted ? agent.resumeRefused?.(result) : undefined;
    if (refused !== undefined) return { result, refused, ...(meter ? { meter } : {}) };
    const outcome = agent.parseResult(result);
    if (capped.signal.aborted && cap !== undefined && !run.signal.aborted)
      return {
        result,
        outcome: { ...outcome, success: false, turns: cap, stoppedAtTurnCap: cap },
        ...(meter ? { meter } : {}),
      };
    // The gateway refused or cut a call for the budget: whether Harness's kill or the refusal
    // itself ended the CLI, the step stopped at the budget, not on an error of the agent's.
    // A gateway in another process (Daytona's calls reach any web process) cannot signal this
    // one: a step that failed asks the spend store whether a budget was what ended it.
    const failed = !(outcome.success && !result.cancelled);
    const gatewayStop =
      run.gateway?.reached() ?? (failed && !run.signal.aborted ? await run.gateway?.check?.() : undefined);
    if (gatewayStop && !run.signal.aborted && failed)
      return {
        result,
        outcome: {
          ...outcome,
          success: false,
          stoppedAtBudget: { limitUsd: gatewayStop.limitUsd, spentUsd: gatewayStop.spentUsd },
        },
        ...(meter ? { meter } : {}),
      };
    // Only a kill that landed stops the step: an agent that had already finished keeps its outcome.
    if (stoppedAt !== undefined && spend.limitUsd !== undefined && result.cancelled && !run.signal.aborted)
      return {
        result,
        outcome: { ...outcome, success: false, stoppedAtBudget: { limitUsd: spend.limitUsd, spentUsd: stoppedAt } },
        ...(meter ? { meter } : {}),
      };
    return { result, outcome, ...(meter ? { meter } : {}) };
  } finally {
    // The last copy, before the scratch folder that holds the record goes.
    await keeper?.finish();
    if (notJson?.first !== undefined) {
      run.reporter.emit({
        type: "run.notice",
        runId: run.runId,
        text: notJson.notice(agent.name, node.title, run.redactor),
        at: run.now().toISOString(),
        quiet: true,
      });
    }
    // Gone before the next step runs, so nothing that step runs can read this prompt's nonce.
    await run.sandbox.removeScratchFile(promptName).catch(() => undefined);
    // The checkout's own scratch folder is kept out of commits anyway; clearing it after each agent
    // step keeps whatever an agent left there from reaching the next step's commands.
    await run.sandbox
      .exec({ argv: ["rm", "-rf", "--", scratchDirName(run.runId)], cwd: run.sandbox.workDir, timeout: 30_000 })
      .catch(() => undefined);
  }
}

/**
 * An empty folder inside the checkout's scratch folder for the agent's session record: the
 * sandbox's user can write there (unlike the private scratch files), it is never committed, and
 * it goes with the scratch folder after the step. Undefined when it could not be made: the CLI
 * then keeps no session, as before.
 */
async function makeSessionDir(run: BlueprintRun): Promise<string | undefined> {
  const relative = `${scratchDirName(run.runId)}/agent-session`;
  const made = await run.sandbox
    .exec({ argv: ["mkdir", "-p", "--", relative], cwd: run.sandbox.workDir, timeout: 30_000 })
    .catch(() => undefined);
  return made?.exitCode === 0 ? `${run.sandbox.workDir}/${relative}` : undefined;
}

function judge(
  run: BlueprintRun,
  node: BlueprintNode,
  result: ExecResult,
  outcome: AgentOutcome | undefined,
): { status: NodeStatus; error?: string } {
  if (outcome?.stoppedAtTurnCap !== undefined)
    return { status: "failed", error: `stopped at the turn cap (${String(outcome.stoppedAtTurnCap)})` };
  if (outcome?.stoppedAtBudget)
    return { status: "failed", error: budgetStop(outcome.stoppedAtBudget.limitUsd, outcome.stoppedAtBudget.spentUsd) };
  // What the agent was retrying when time ran out is the cause; the time alone is only the symptom.
  const cause = outcome?.retrying
    ? ` while the agent was retrying: ${outcome.retrying.error} ` +
      `(${String(outcome.retrying.times)} time${outcome.retrying.times === 1 ? "" : "s"})`
    : "";
  if (result.cancelled) {
    return run.stopReason() === "budget"
      ? { status: "timed_out", error: `stopped: the run's time budget ran out${cause}` }
      : { status: "cancelled", error: "cancelled" };
  }
  if (result.timedOut) return { status: "timed_out", error: `timed out after ${formatMs(result.durationMs)}${cause}` };
  if (result.exitCode === EXIT_NOT_FOUND && /not found/i.test(result.stderr)) {
    const program = node.kind === "agent" ? run.agent?.program : (node.argv[0] ?? "");
    const hint =
      node.kind === "agent" && run.agent
        ? `${run.agent.program} is not installed in the sandbox: ` +
          `install it (${run.agent.installHint}) or choose another agent with --agent`
        : `${program ?? "the program"} is not installed in the sandbox`;
    return { status: "failed", error: hint };
  }
  if (node.kind === "agent") {
    if (!outcome) return { status: "failed", error: `the agent exited with ${String(result.exitCode)}` };
    if (!outcome.success || result.exitCode !== 0)
      return { status: "failed", error: outcome.error ?? `the agent exited with ${String(result.exitCode)}` };
    return { status: "succeeded" };
  }
  if (result.exitCode !== 0) {
    const lastLine = (result.stderr || result.stdout).trim().split("\n").at(-1)?.slice(0, 200);
    return { status: "failed", error: `exit ${String(result.exitCode)}${lastLine ? `: ${lastLine}` : ""}` };
  }
  return { status: "succeeded" };
}

/**
 * Emits a node's output tail at most once per interval, however fast the output comes, and a
 * last time when the node ends, so a chatty agent cannot flood reporters or GitHub.
 */
function outputThrottle(run: BlueprintRun, nodeId: string, attempt: number, render: () => string) {
  let timer: NodeJS.Timeout | undefined;
  let dirty = false;
  let lastEmit = 0;
  const emit = (): void => {
    timer = undefined;
    if (!dirty) return;
    dirty = false;
    lastEmit = Date.now();
    run.reporter.emit({
      type: "node.output",
      runId: run.runId,
      nodeId,
      attempt,
      tail: render(),
      at: run.now().toISOString(),
    });
  };
  return {
    poke(): void {
      dirty = true;
      if (timer) return;
      const wait = Math.max(0, lastEmit + run.outputThrottleMs - Date.now());
      timer = setTimeout(emit, wait);
    },
    stop(): void {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (dirty) emit();
    },
  };
}

/**
 * The tail as users should see it: redacted, and when the window cut into the output, starting
 * at a line boundary, so half a secret at the cut can never show.
 */
function readableTail(buffer: TailBuffer, redactor: Redactor): string {
  let text = buffer.text();
  if (buffer.truncated) {
    const marker = text.indexOf("…]\n");
    const body = marker >= 0 ? text.slice(marker + 3) : text;
    const firstNewline = body.indexOf("\n");
    text = firstNewline >= 0 ? body.slice(firstNewline + 1) : body;
  }
  return redactor(text);
}

/** The most of an agent's summary a run keeps: a PR body shows 4,000 characters of it. */
const SUMMARY_BYTES = 16 * 1024;

/**
 * An agent's summary cut to its last `SUMMARY_BYTES` before anything redacts it: a summary is
 * the agent's last lines, and one line can be megabytes that every reporter would redact
 * again. The cut moves forward to a line (or word) boundary, so half a secret never shows.
 */
function summaryTail(summary: string): string {
  if (Buffer.byteLength(summary) <= SUMMARY_BYTES) return summary;
  const tail = Buffer.from(summary).subarray(-SUMMARY_BYTES).toString("utf8");
  const boundary = tail.indexOf("\n") >= 0 ? tail.indexOf("\n") : tail.search(/\s/);
  return boundary >= 0
    ? `[… the start of the summary is not shown]\n${tail.slice(boundary + 1)}`
    : "[… the summary was one unbroken line, not shown]";
}

function formatMs(ms: number): string {
  return ms >= 60_000 ? `${(ms / 60_000).toFixed(1)} min` : `${(ms / 1000).toFixed(1)} s`;
}

/** Characters of a stray line quoted in the notice about it. */
const NOT_JSON_EXCERPT_CHARS = 100;

/**
 * Counts the lines of a JSON-lines stream that are not JSON objects (a banner, a crash trace,
 * a CLI whose format changed), keeping the first, so a step says once, at its end, that what
 * was read from its live output may be incomplete.
 */
class NotJsonLines {
  count = 0;
  first: string | undefined;

  line(line: string): void {
    const trimmed = line.trim();
    if (trimmed === "" || isJsonObject(trimmed)) return;
    this.count += 1;
    // The whole line, for now: a secret cut at the excerpt's end could escape the redactor.
    this.first ??= trimmed;
  }

  notice(agent: string, step: string, redactor: Redactor): string {
    const excerpt = quotable(redactor(this.first ?? ""));
    const lines = this.count === 1 ? "1 line" : `${String(this.count)} lines`;
    return (
      `the ${agent} agent printed ${lines} that ${this.count === 1 ? "is" : "are"} not JSON events in "${step}" ` +
      `(the first: "${excerpt}"): its turns, cost and progress were read from the other lines`
    );
  }
}

function isJsonObject(line: string): boolean {
  if (!line.startsWith("{")) return false;
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === "object" && !Array.isArray(value);
  } catch {
    return false;
  }
}

/**
 * The start of a line from the agent's output, fit to quote in one sentence that readers render
 * as Markdown or HTML: control characters and line breaks become spaces, and nothing in it can
 * mention anyone, load an image, open a code span or form a tag.
 */
function quotable(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\s]+/g, " ").trim();
  const cut = flat.length > NOT_JSON_EXCERPT_CHARS ? `${flat.slice(0, NOT_JSON_EXCERPT_CHARS)}…` : flat;
  return cut
    .replace(/[`<>]/g, "'")
    .replace(/!\[/g, "[")
    .replace(/@(?=\w)/g, "@\u200B")
    .replace(/"/g, "'");
}

/** Calls `onLine` with each complete line of a stream that arrives in chunks; a partial line waits. */
function lineSplitter(onLine: (line: string) => void): (chunk: string) => void {
  let pending = "";
  return (chunk) => {
    pending += chunk;
    let newline = pending.indexOf("\n");
    while (newline >= 0) {
      onLine(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
      newline = pending.indexOf("\n");
    }
    // A line longer than any event: never a turn boundary; dropped rather than kept growing.
    if (pending.length > 1_000_000) pending = "";
  };
}

/** Least time between two progress events of one step: a busy agent must not flood reporters. */
const PROGRESS_INTERVAL_MS = 1_000;

/**
 * Emits what the agent is doing at most once a second; what comes in between is dropped, and
 * the next activity after the interval shows.
 */
function progressEmitter(run: BlueprintRun, nodeId: string, attempt: number): (activity: string) => void {
  let last = -Infinity;
  return (activity) => {
    const now = Date.now();
    if (now - last < PROGRESS_INTERVAL_MS) return;
    last = now;
    run.reporter.emit({
      type: "node.progress",
      runId: run.runId,
      nodeId,
      attempt,
      // Paths as the repository knows them, not where the sandbox keeps its checkout.
      text: run.redactor(activity.replaceAll(`${run.sandbox.workDir}/`, "")),
      at: run.now().toISOString(),
    });
  };
}
