/**
 * The model gateway in a process of its own, for `bench/gateway.ts`: its CPU is then its own.
 * argv: <upstream base URL> <socket dir>. Sends `{ url, token }` once listening, and answers
 * `"cpu"` with `process.cpuUsage()`.
 */
import { DEFAULT_PRICES } from "../../src/agents/prices.js";
import { RunGatewayAccess, tokenSlots } from "../../src/gateway/agent-access.js";
import { startGateway } from "../../src/gateway/local-gateway.js";
import { upstreamsFromEnvironment } from "../../src/gateway/upstreams.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";

const [upstreamUrl = "", socketDir = ""] = process.argv.slice(2);
const gateway = await startGateway({
  upstreams: upstreamsFromEnvironment({
    ANTHROPIC_API_KEY: `sk-ant-api03-${"b".repeat(40)}`,
    ANTHROPIC_BASE_URL: upstreamUrl,
  }),
  prices: DEFAULT_PRICES,
  spend: new MemorySpendStore(),
  socketDir,
});
const access = new RunGatewayAccess(
  gateway.grants,
  // A budget, so every call is reserved and settled as a real run's would be.
  { runId: "bench", agent: "claude-code", expiresAt: Date.now() + 3_600_000, limits: { runUsd: 1_000_000 } },
  tokenSlots(["ANTHROPIC_API_KEY"], gateway.upstreams),
);
const token = (await access.credentials())["ANTHROPIC_API_KEY"] ?? "";
process.on("message", (message) => {
  if (message === "cpu") process.send?.({ cpu: process.cpuUsage() });
  if (message === "stop") void gateway.close().then(() => process.exit(0));
});
process.send?.({ url: gateway.listeners.url, token });
