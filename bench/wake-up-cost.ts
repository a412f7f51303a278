/**
 * What waking an idle Node process costs, and what one outgoing GitHub-sized request costs on top
 * of it, at the webhook benchmark's pace and at a busy one. The webhook benchmark sends 50
 * webhooks a second, so each server sleeps about 20 ms between deliveries; this measures, in one
 * client process against a `node:http` server in another (answering 201 with a 1 KB JSON body, as
 * GitHub answers a new comment):
 *
 * - a timer that fires at the rate and does nothing: the wake-up alone;
 * - the same timer sending one keep-alive POST (`createRawFetch`, the cheapest client Harness
 *   has) and parsing its answer: what one acknowledgement write costs;
 * - the same timer sending two POSTs at once: the 👀 and the status comment.
 *
 * CPU is `process.cpuUsage()` of the client over each window (user + system), per tick; the
 * median of the rounds is printed. Run on the machine the webhook benchmark runs on, with nothing
 * else running.
 *
 *   npm run bench:wake-up -- [--seconds 10] [--rounds 3]
 */
import { fork } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createRawFetch } from "../src/github/node-fetch.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};

// The answer GitHub gives to a new issue comment, in size and shape.
const COMMENT_ANSWER = JSON.stringify({
  id: 1_234_567_890,
  node_id: "IC_kwDOAbCdEf5JlmNo",
  url: "https://api.github.com/repos/octo-org/widgets/issues/comments/1234567890",
  html_url: "https://github.com/octo-org/widgets/issues/7#issuecomment-1234567890",
  issue_url: "https://api.github.com/repos/octo-org/widgets/issues/7",
  body: "⏳ **Harness** queued this run.",
  user: {
    login: "harness[bot]",
    id: 41_898_282,
    node_id: "BOT_kgDOAn9RKg",
    type: "Bot",
    site_admin: false,
    avatar_url: "https://avatars.githubusercontent.com/in/9100?v=4",
    html_url: "https://github.com/apps/harness",
  },
  created_at: "2026-11-26T18:00:00Z",
  updated_at: "2026-11-26T18:00:00Z",
  author_association: "NONE",
  reactions: {
    url: "https://api.github.com/repos/octo-org/widgets/issues/comments/1234567890/reactions",
    total_count: 0,
  },
  performed_via_github_app: { id: 9100, slug: "harness", name: "Harness" },
});

if (process.argv[2] === "server") {
  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      response.writeHead(201, { "content-type": "application/json; charset=utf-8" }).end(COMMENT_ANSWER);
    });
  });
  server.listen(0, "127.0.0.1", () => {
    process.send?.((server.address() as AddressInfo).port);
  });
  process.on("disconnect", () => process.exit(0));
} else {
  await main();
}

async function main(): Promise<void> {
  const SECONDS = argValue("seconds", 10);
  const ROUNDS = Math.max(1, argValue("rounds", 3));
  const loadBefore = loadavg();
  const server = fork(fileURLToPath(import.meta.url), ["server"], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const port = await new Promise<number>((resolve) => {
    server.once("message", (message) => {
      resolve(Number(message));
    });
  });
  const url = `http://127.0.0.1:${String(port)}/repos/octo-org/widgets/issues/7/comments`;
  const fetchRaw = createRawFetch();
  const post = async (): Promise<void> => {
    const answer = await fetchRaw(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "token not-a-real-token", "user-agent": "bench" },
      body: JSON.stringify({ body: "⏳ **Harness** queued this run." }),
    });
    JSON.parse(String(answer.body));
  };

  /** Ticks at `rate` for `seconds`, each doing `work`; CPU µs per tick. */
  const measure = async (rate: number, seconds: number, work: () => Promise<unknown>): Promise<number> => {
    const ticks = Math.round(rate * seconds);
    const inFlight: Array<Promise<unknown>> = [];
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let k = 0; k < ticks; k++) {
      const wait = started + (k * 1000) / rate - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      inFlight.push(work());
    }
    await Promise.all(inFlight);
    const spent = process.cpuUsage(cpu);
    return (spent.user + spent.system) / ticks;
  };

  const scenarios = {
    "timer only": () => Promise.resolve(),
    "one POST": post,
    "two POSTs at once": () => Promise.all([post(), post()]),
  };
  const rates = [50, 1000];
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

  // Warm the client, the server and the socket pool before any window counts.
  await measure(1000, 2, scenarios["two POSTs at once"]);
  const results = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++)
    for (const rate of rates)
      for (const [name, work] of Object.entries(scenarios)) {
        const key = `${String(rate)} ${name}`;
        results.set(key, [...(results.get(key) ?? []), await measure(rate, SECONDS, work)]);
      }
  server.disconnect();
  const loadAfter = loadavg();

  const figure = (rate: number, name: keyof typeof scenarios) => median(results.get(`${String(rate)} ${name}`) ?? []);
  console.log(
    `node ${process.version}, ${String(cpus().length)} cores; ${String(ROUNDS)} rounds of ${String(SECONDS)} s per ` +
      `line, median; load average ${loadBefore.map((l) => l.toFixed(2)).join(", ")} before, ` +
      `${loadAfter.map((l) => l.toFixed(2)).join(", ")} after`,
  );
  console.log("");
  console.log(
    "| ticks per second | timer only, µs per tick | one POST, µs per tick | two POSTs at once, µs per tick | " +
      "what the first POST adds | what the second adds |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const rate of rates) {
    const timer = figure(rate, "timer only");
    const one = figure(rate, "one POST");
    const two = figure(rate, "two POSTs at once");
    console.log(
      `| ${String(rate)} | ${timer.toFixed(0)} | ${one.toFixed(0)} | ${two.toFixed(0)} | ` +
        `${(one - timer).toFixed(0)} | ${(two - one).toFixed(0)} |`,
    );
  }
  for (const [key, values] of results)
    console.log(`  ${key}: rounds ${values.map((value) => value.toFixed(0)).join(", ")} µs`);
}
