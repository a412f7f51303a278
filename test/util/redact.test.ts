import { describe, expect, test } from "vitest";
import fc from "fast-check";
import { REDACTED, createRedactor, redact, secretsFromEnv } from "../../src/util/redact.js";
import { fakeJwt, fakePemLines, fakeToken } from "../helpers/fake-secrets.js";

// Credential shapes made up at run time (test/helpers/fake-secrets.ts): nothing secret-looking is committed.
const ghp = fakeToken("ghp_");
const ghs = fakeToken("ghs_");
const gho = fakeToken("gho_");
const ghu = fakeToken("ghu_");
const pat = fakeToken("github_pat_", 82);
const anthropic = fakeToken("sk-ant-api03-", 40, "url-safe");
const openai = fakeToken("sk-proj-", 36);
const openaiLegacy = fakeToken("sk-", 32);
const daytona = fakeToken("dtn_", 32);
const aws = fakeToken("AKIA", 16, "upper");
const slack = `${fakeToken("xoxb-", 12)}-${fakeToken("", 24)}`;
const jwt = fakeJwt();
const key = fakePemLines(2);
const pem = [key.header, ...key.body, key.footer].join("\n");
const pemFirstLine = key.body[0] ?? "";
const truncatedPem = `${fakePemLines(1).header.replace("RSA ", "")}\n${fakePemLines(1).body[0]?.slice(0, 32) ?? ""}`;
const truncatedBody = truncatedPem.split("\n")[1] ?? "";

const table: Array<[label: string, line: string, secret: string]> = [
  ["classic PAT in a git URL", `fatal: unable to access 'https://x-access-token:${ghp}@github.com/o/r.git/'`, ghp],
  ["installation token echoed by a script", `Using token ${ghs} for acme/widgets`, ghs],
  ["OAuth token in JSON", `{"access_token":"${gho}","token_type":"bearer"}`, gho],
  ["user-to-server token in a header dump", `> GET /user HTTP/1.1\n> Authorization: token ${ghu}`, ghu],
  ["fine-grained PAT in an env dump", `GH_TOKEN=${pat}`, pat],
  ["Anthropic key in an error", `Error: invalid x-api-key ${anthropic} (401)`, anthropic],
  ["OpenAI project key in a config print", `openai.api_key = '${openai}'`, openai],
  ["legacy OpenAI key inline", `export OPENAI_API_KEY=${openaiLegacy}`, openaiLegacy],
  ["Daytona key in a stack", `DaytonaError: request failed for key ${daytona}`, daytona],
  ["AWS access key id", `aws_access_key_id = ${aws}`, aws],
  ["Slack bot token", `posting with ${slack}`, slack],
  ["GitHub App JWT", `Bearer JWT ${jwt} expired`, jwt],
  ["PEM private key block", `PRIVATE_KEY loaded:\n${pem}\ndone`, pemFirstLine],
  ["PEM key cut off by truncation", `key is ${truncatedPem}`, truncatedBody],
  ["Bearer Authorization header", "Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"],
  [
    "Basic Authorization header (base64 credentials)",
    "authorization: Basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
    "eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
  ],
  [
    "git http.extraHeader trace",
    "http.extraheader=AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
    "eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
  ],
  ["password in a URL", "cloning https://deploy:hunter2hunter2@git.example.com/repo", "hunter2hunter2"],
  ["DB password assignment", "DATABASE_PASSWORD=correct-horse-battery", "correct-horse-battery"],
  ["webhook secret in YAML", "webhook_secret: 9f8e7d6c5b4a39f8e7d6", "9f8e7d6c5b4a39f8e7d6"],
  ["client secret in JSON", `{"client_secret": "f00dbabe1234deadbeef5678"}`, "f00dbabe1234deadbeef5678"],
  [
    "NPM token in .npmrc",
    "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
  ],
];

describe("redact: well-known shapes in realistic log lines", () => {
  test("the table has at least 20 cases", () => {
    expect(table.length).toBeGreaterThanOrEqual(20);
  });

  test.each(table)("%s", (_label, line, secret) => {
    const out = redact(line);
    expect(out).not.toContain(secret);
    expect(out).toContain(REDACTED);
  });
});

describe("redact: a token with no separator around it", () => {
  // Text without ":" or "=" skips the header, URL and assignment passes, and text without a
  // token prefix skips the shapes: each shape must still be found on its own in plain prose.
  test.each([ghp, ghs, gho, ghu, pat, anthropic, openai, openaiLegacy, daytona, aws, slack, jwt, pem])(
    "%#",
    (token) => {
      const out = redact(`the value (${token}) came back twice ${token}`);
      expect(out).not.toContain(token.split("\n")[1] ?? token);
      expect(out.split(REDACTED)).toHaveLength(3);
    },
  );

  test("a registered secret with no token shape is still replaced in plain prose", () => {
    expect(createRedactor(["plainword1234"])("said plainword1234 aloud")).toBe(`said ${REDACTED} aloud`);
  });
});

describe("redact: known values", () => {
  test("replaces every occurrence of a registered secret, whatever its shape", () => {
    const out = redact("pw=plainpassword; again plainpassword.", ["plainpassword"]);
    expect(out).toBe(`pw=${REDACTED}; again ${REDACTED}.`);
  });

  test("longer secrets win over shorter ones they contain", () => {
    expect(redact("abcd-efgh", ["abcd", "abcd-efgh"])).toBe(REDACTED);
  });

  test("regex metacharacters in a secret are matched literally", () => {
    expect(redact("value a.b*c+d? end", ["a.b*c+d?"])).toBe(`value ${REDACTED} end`);
    expect(redact("axbxcxd", ["a.b*c+d?"])).toBe("axbxcxd");
  });

  test("ignores undefined and too-short values rather than garbling the text", () => {
    expect(redact("a b c", [undefined, "", "b"])).toBe("a b c");
  });

  test("secretsFromEnv picks values of KEY/TOKEN/SECRET/PASSWORD variables only", () => {
    const env = {
      ANTHROPIC_API_KEY: "k-123456789",
      GITHUB_TOKEN: "t-123456789",
      WEBHOOK_SECRET: "s-123456789",
      PGPASSWORD: "p-123456789",
      PATH: "/usr/bin",
      HOME: "/root",
      EMPTY_TOKEN: "",
    };
    expect(secretsFromEnv(env).sort()).toEqual(["k-123456789", "p-123456789", "s-123456789", "t-123456789"]);
    const scrub = createRedactor(secretsFromEnv(env));
    expect(scrub("path /usr/bin key k-123456789")).toBe(`path /usr/bin key ${REDACTED}`);
  });
});

describe("redact: leaves ordinary output alone", () => {
  test.each([
    "npm test: 42 passed, 0 failed",
    "commit 3f2a9c1b0e7d6c5b4a39281706f5e4d3c2b1a090",
    '{"input_tokens": 12345, "output_tokens": 678}',
    "max_tokens=4096 use_cache=true",
    "See https://github.com/acme/widgets/pull/12",
    "task-runner --skip-tests",
  ])("%s", (line) => {
    expect(redact(line)).toBe(line);
  });
});

describe("redact: hostile input costs time linear in its length", () => {
  const MB = 1024 * 1024;
  const fill = (unit: string): string => unit.repeat(Math.ceil(MB / unit.length)).slice(0, MB);
  const redactor = createRedactor([fakeToken("sk-ant-api03-", 40, "url-safe")]);
  // Generous: linear work on 1 MB takes tens of milliseconds; the cubic pattern this replaced
  // took 5 s on 4 KB of the first line below.
  const BUDGET_MS = 2_000;

  test.each([
    ["key-key-key-…", "key-"],
    ["key= with no value, repeated", "key="],
    ["a name then a separator, forever", "api_token: "],
    ["one endless value after a secret's name", "x"],
    ["word boundaries at every letter before ://", "a-"],
    ["scheme after scheme", "a://b:"],
    ["PEM headers with no end", "-----BEGIN PRIVATE PRIVATE "],
    ["quotes and colons", `"secret":"`],
  ])("1 MB of %s", (_label, unit) => {
    const text = unit === "x" ? `password=${fill("x")}` : fill(unit);
    const started = performance.now();
    redactor(text);
    expect(performance.now() - started).toBeLessThan(BUDGET_MS);
  });

  test(
    "any mix of the hostile pieces, up to 1 MB, redacts within " +
      "the budget, and a secret planted after it is still caught",
    () => {
      const pieces = [
        "key",
        "-",
        "=",
        ":",
        " ",
        '"',
        "'",
        "token",
        "a",
        "://",
        "@",
        "-----BEGIN ",
        "PRIVATE KEY-----",
        "sk-",
        "x",
        "secret_",
        "\n",
        ",",
        "[REDACTED]",
      ];
      fc.assert(
        fc.property(
          fc.array(fc.constantFrom(...pieces), { minLength: 1, maxLength: 64 }),
          fc.integer({ min: 1, max: 40_000 }),
          (units, repeat) => {
            const hostile = units.join("").repeat(repeat).slice(0, MB);
            const value = fakeToken("", 24);
            const started = performance.now();
            const out = redactor(`${hostile}\nDATABASE_PASSWORD=${value}\n`);
            expect(performance.now() - started).toBeLessThan(BUDGET_MS);
            // Either the assignment rule or an unterminated private key before it took the value.
            expect(out).not.toContain(value);
          },
        ),
        { numRuns: 25 },
      );
    },
  );
});

describe("redact: counts after secret-sounding names", () => {
  test.each([
    ['{"total_tokens":1000010}', '{"total_tokens":1000010}'],
    ['{"usage":{"output_tokens":12345678]}', '{"usage":{"output_tokens":12345678]}'],
    ['{"has_key":true}', '{"has_key":true}'],
  ])("%s is left as it is", (line, expected) => {
    expect(redact(line)).toBe(expected);
  });

  test("a value that is not a count still goes, whatever closes it", () => {
    expect(redact('{"api_key":hunter2hunter2}')).toBe('{"api_key":[REDACTED]');
  });
});

describe("redact without the guesses after secret-sounding names", () => {
  test("known values and token shapes go; a name's value stays as written", () => {
    const known = fakeToken("sk-ant-api03-", 48);
    const shaped = fakeToken("ghp_", 36);
    const mask = createRedactor([known], { assignments: false });
    expect(mask(`password=hunter2hunter2 key: ${known} token ${shaped}`)).toBe(
      `password=hunter2hunter2 key: ${REDACTED} token ${REDACTED}`,
    );
  });
});
