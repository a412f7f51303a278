/**
 * Redaction throughput: 1 MB of ordinary agent output and 1 MB of hostile text through
 * `createRedactor`, beside the regular-expression version it replaced (whose `NAME=value` rule
 * backtracks cubically, so it is only given hostile text of 4 KB). Median of N runs each.
 *
 *   npm run bench:redact -- [--samples 15]
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { createRedactor } from "../src/util/redact.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const SAMPLES = argValue("samples", 15);
const MB = 1024 * 1024;
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** The previous implementation's last step, kept here only to measure against. */
const PREVIOUS_ASSIGNMENT = new RegExp(
  String.raw`\b([A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|credential)[A-Za-z0-9_.-]*)` +
    String.raw`(["']?\s*[:=]\s*["']?)([^\s"',;&]{8,})`,
  "gi",
);
const PREVIOUS_SHAPES = [
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g,
  /\bgh[pousr]_[A-Za-z0-9]{20,255}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,255}\b/g,
  /\bsk-ant-[A-Za-z0-9_-]{8,}/g,
  /\bsk-[A-Za-z0-9_-]{16,}/g,
  /\bdtn_[A-Za-z0-9_-]{16,}/g,
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/g,
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
];
function previousRedactor(secret: string): (text: string) => string {
  return (text) => {
    let out = text.split(secret).join("[REDACTED]");
    out = out.replace(/\b((?:Proxy-)?Authorization\s*:)[ \t]*[^\r\n]+/gi, "$1 [REDACTED]");
    for (const shape of PREVIOUS_SHAPES) out = out.replace(shape, "[REDACTED]");
    out = out.replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/:@]+:[^\s/@]+@/gi, "$1[REDACTED]@");
    return out.replace(PREVIOUS_ASSIGNMENT, (match, name: string, separator: string, value: string) =>
      /^(?:\d+|true|false|null|undefined|none|\[REDACTED\].*)$/i.test(value) ? match : `${name}${separator}[REDACTED]`,
    );
  };
}

/** What agents print: test runner lines, timestamps, URLs, config dumps, JSON events. */
function ordinaryOutput(bytes: number): string {
  const lines = [
    "2026-11-23T17:31:02.123Z [info] GET https://registry.npmjs.org/zod 200 (143 ms)",
    " ✓ test/util/redact.test.ts > redact > keeps ordinary text (3 ms)",
    '{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"npm test","exit_code":0}}',
    "  at Object.<anonymous> (/home/daytona/workspace/widgets/src/index.ts:42:17)",
    "config: timeout=30000 retries=3 cache_dir=/tmp/cache token_limit=4096 api_key_env=ANTHROPIC_API_KEY",
    "diff --git a/src/cli/main.ts b/src/cli/main.ts",
    '+    const secretName = options.secretName ?? "NPM_TOKEN";',
    "Compiling harness v0.1.0 (/work/main): 213 files in 2.41s",
  ];
  let text = "";
  for (let i = 0; text.length < bytes; i++) text += `${lines[i % lines.length] ?? ""}\n`;
  return text.slice(0, bytes);
}

function time(redact: (text: string) => string, text: string, runs = SAMPLES): number {
  redact(text);
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    redact(text);
    samples.push(performance.now() - started);
  }
  return median(samples);
}

const secret = `sk-ant-api03-${"Q".repeat(40)}`;
const current = createRedactor([secret]);
const previous = previousRedactor(secret);
console.log(
  `node ${process.version}; median of ${String(SAMPLES)}; load at start ${loadavg()
    .map((v) => v.toFixed(2))
    .join(" ")}`,
);
console.log("\n| input | now | before |\n|---|---|---|");
const ordinary = ordinaryOutput(MB);
console.log(
  `| 1 MB of ordinary agent output | ${time(current, ordinary).toFixed(1)} ms | ` +
    `${time(previous, ordinary).toFixed(1)} ms |`,
);
for (const [label, unit] of [
  ["key-key-…", "key-"],
  ["`api_token: ` repeated", "api_token: "],
  ["`a-` repeated (a word boundary at every letter)", "a-"],
] as const) {
  const big = unit.repeat(Math.ceil(MB / unit.length)).slice(0, MB);
  const small = big.slice(0, 4096);
  // The previous version takes seconds on 4 KB of these: three runs are enough to show it.
  const before = time(previous, small, 3);
  console.log(`| 1 MB of ${label} | ${time(current, big).toFixed(1)} ms | 4 KB of it: ${before.toFixed(0)} ms |`);
}
console.log(
  `\nload at end ${loadavg()
    .map((v) => v.toFixed(2))
    .join(" ")}`,
);
