/**
 * What one `/harness` comment can cost in config parsing: every hostile YAML shape at the size
 * cap (64 KiB for `.github/harness.yml`, 256 KiB for a blueprint) through Harness's bounded
 * parser, beside the `yaml` package's default parse that Probot's config plugin used before
 * (given the 64 KiB inputs only, and the slowest shapes at 256 KiB, so the bench ends), and the
 * time to refuse a 1 MiB file by the size GitHub reports. Median of N runs each.
 *
 *   npm run bench:config-yaml -- [--samples 5]
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { parse } from "yaml";
import {
  BLUEPRINT_YAML_LIMITS,
  CONFIG_YAML_LIMITS,
  parseBoundedYaml,
  type YamlLimits,
} from "../src/config/bounded-yaml.js";
import { loadRepoConfig, MAX_BLUEPRINT_BYTES, MAX_CONFIG_BYTES } from "../src/config/load-repo-config.js";
import { RepoConfigError } from "../src/config/repo-config.js";
import { hostileShapes } from "../test/helpers/hostile-yaml.js";

const samplesIndex = process.argv.indexOf("--samples");
const SAMPLES = samplesIndex >= 0 ? Number(process.argv[samplesIndex + 1]) : 5;
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

function time(work: () => unknown): number {
  const runs: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    try {
      work();
    } catch {
      // A refusal is an answer too: its cost is what is measured.
    }
    runs.push(performance.now() - started);
  }
  return median(runs);
}

const bounded = (text: string, limits: Readonly<YamlLimits>) => () => parseBoundedYaml(text, limits);
const unbounded = (text: string) => (): unknown => parse(text, { logLevel: "error" }) as unknown;

console.log(
  `node ${process.version}, load ${loadavg()
    .map((value) => value.toFixed(2))
    .join(" ")}, median of ${String(SAMPLES)}`,
);
console.log("| shape | bounded, 64 KiB | before, 64 KiB | bounded, 256 KiB |");
console.log("|---|---|---|---|");
let worstConfig = 0;
let worstBlueprint = 0;
const config = hostileShapes(MAX_CONFIG_BYTES);
const blueprint = hostileShapes(MAX_BLUEPRINT_BYTES);
for (const [index, [shape, text]] of config.entries()) {
  const now = time(bounded(text, CONFIG_YAML_LIMITS));
  const large = time(bounded(blueprint[index]?.[1] ?? "", BLUEPRINT_YAML_LIMITS));
  const before = time(unbounded(text));
  worstConfig = Math.max(worstConfig, now);
  worstBlueprint = Math.max(worstBlueprint, large);
  console.log(`| ${shape} | ${now.toFixed(1)} ms | ${before.toFixed(1)} ms | ${large.toFixed(1)} ms |`);
}
console.log(`worst bounded: ${worstConfig.toFixed(1)} ms at 64 KiB, ${worstBlueprint.toFixed(1)} ms at 256 KiB`);

// A 1 MiB file: GitHub reports its size, so Harness refuses it without decoding it.
const huge = "k: 1\n".repeat(1_048_576 / 5);
const octokit = {
  request: (_route: string, params?: Record<string, unknown>) => {
    if (params?.["repo"] === ".github") return Promise.reject(Object.assign(new Error("Not Found"), { status: 404 }));
    return Promise.resolve({
      data: {
        type: "file",
        encoding: "base64",
        size: Buffer.byteLength(huge),
        name: "harness.yml",
        path: ".github/harness.yml",
        sha: "0".repeat(40),
        content: Buffer.from(huge).toString("base64"),
      },
    });
  },
};
const refusals: number[] = [];
for (let i = 0; i < SAMPLES; i++) {
  const started = performance.now();
  const outcome = await loadRepoConfig(octokit, "acme", "widgets").then(
    () => "accepted",
    (error: unknown) => (error instanceof RepoConfigError ? "refused" : String(error)),
  );
  refusals.push(performance.now() - started);
  if (outcome !== "refused") throw new Error(`a 1 MiB config was ${outcome}`);
}
console.log(
  `1 MiB .github/harness.yml refused in ${median(refusals).toFixed(2)} ms` +
    ` (the old parse of 1 MiB of keys took about a minute)`,
);
