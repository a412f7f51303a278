import { randomBytes, randomInt } from "node:crypto";
import { describe, expect, test } from "vitest";
import { maskSecrets, scanForSecrets, type KnownSecret, type SecretFinding } from "../../src/delivery/secret-scan.js";
import { fakePem, fakePemLines, fakeToken } from "../helpers/fake-secrets.js";

// Every credential-shaped value is made up when the tests run (test/helpers/fake-secrets.ts).
const anthropic = fakeToken("sk-ant-api03-", 80, "url-safe");
const ANTHROPIC: KnownSecret = { name: "ANTHROPIC_API_KEY", value: anthropic };

interface Hunk {
  /** First line of the hunk in the new file. */
  at: number;
  added: readonly string[];
  removed?: readonly string[];
}

/** One file's part of `git diff -U0` output, counts and all. */
function fileDiff(path: string, hunks: readonly Hunk[], options: { newFile?: boolean } = {}): string {
  const lines = [`diff --git a/${path} b/${path}`];
  if (options.newFile) lines.push("new file mode 100644", "index 0000000..3b18e51", "--- /dev/null");
  else lines.push("index 6f1c2a4..9d0e7b3 100644", `--- a/${path}`);
  lines.push(`+++ b/${path}`);
  for (const hunk of hunks) {
    const removed = hunk.removed ?? [];
    const range = (count: number): string =>
      count === 0 ? `${String(hunk.at - 1)},0` : `${String(hunk.at)},${String(count)}`;
    lines.push(
      `@@ -${range(removed.length)} +${range(hunk.added.length)} @@`,
      ...removed.map((line) => `-${line}`),
      ...hunk.added.map((line) => `+${line}`),
    );
  }
  return `${lines.join("\n")}\n`;
}

function scan(
  patch: string,
  secrets: readonly KnownSecret[] = [ANTHROPIC],
  messages: readonly string[] = [],
): SecretFinding[] {
  return scanForSecrets({ patch, messages, secrets });
}

const toBase64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
const toHex = (text: string): string => Buffer.from(text, "utf8").toString("hex");
/** The forms a finding or a masked text must never hold. */
function formsOf(value: string): string[] {
  return [
    value,
    toBase64(value),
    Buffer.from(value).toString("base64url"),
    toHex(value),
    toHex(value).toUpperCase(),
    encodeURIComponent(value),
  ];
}
/** Every run of `length` characters of `value`. */
function windowsOf(value: string, length: number): string[] {
  return Array.from({ length: value.length - length + 1 }, (_, i) => value.slice(i, i + length));
}

describe("scanForSecrets: known values", () => {
  test("the plain value, with its file and line in the new file", () => {
    const patch = fileDiff(".env", [{ at: 3, added: ["PORT=3000", `ANTHROPIC_API_KEY=${anthropic}`] }]);
    expect(scan(patch)).toEqual([{ where: "diff", file: ".env", line: 4, kind: "ANTHROPIC_API_KEY" }]);
  });

  test("line numbers follow each hunk's header", () => {
    const patch = fileDiff("src/config.ts", [
      { at: 10, added: ["const a = 1;"], removed: ["const a = 0;"] },
      { at: 42, added: ["// unrelated", `const key = "${anthropic}";`] },
    ]);
    expect(scan(patch)).toEqual([{ where: "diff", file: "src/config.ts", line: 43, kind: "ANTHROPIC_API_KEY" }]);
  });

  // base64(prefix + secret + suffix) for every alignment of the secret in its 3-byte group.
  const base64Cases = [0, 1, 2, 3, 4, 5].flatMap((prefix) =>
    [0, 1, 2].flatMap((suffix) =>
      (["base64", "base64url"] as const).flatMap((alphabet) =>
        [true, false].map(
          (padded) =>
            [
              `prefix ${String(prefix)}, suffix ${String(suffix)}, ${alphabet}${padded ? "" : ", unpadded"}`,
              prefix,
              suffix,
              alphabet,
              padded,
            ] as const,
        ),
      ),
    ),
  );
  test.each(base64Cases)("base64 inside a larger blob: %s", (_label, prefix, suffix, alphabet, padded) => {
    const blob = Buffer.from(`${"p".repeat(prefix)}${anthropic}${"s".repeat(suffix)}`).toString(alphabet);
    const written = padded ? blob : blob.replace(/=+$/, "");
    const patch = fileDiff("deploy/values.yaml", [{ at: 7, added: ["config:", `  blob: ${written}`] }]);
    expect(scan(patch)).toEqual([
      { where: "diff", file: "deploy/values.yaml", line: 8, kind: "ANTHROPIC_API_KEY (base64-encoded)" },
    ]);
  });

  test("base64 wrapped at 76 columns, as `base64` writes it: the line where the value starts", () => {
    const prefix = "x".repeat(100); // the value's first full base64 character is the 134th of the blob
    const wrapped = toBase64(`${prefix}${anthropic}\n`).match(/.{1,76}/g) ?? [];
    const patch = fileDiff("notes/blob.txt", [{ at: 1, added: ["-- blob --", ...wrapped] }], { newFile: true });
    expect(scan(patch)).toEqual([
      {
        where: "diff",
        file: "notes/blob.txt",
        line: 3,
        kind: "ANTHROPIC_API_KEY (base64-encoded, split across lines)",
      },
    ]);
  });

  test("URL-encoded: encodeURIComponent, form encoding with +, upper- and lower-case escapes", () => {
    const value = `${fakeToken("", 20)}/+= &?:@!'()${fakeToken("", 12)}`;
    const secrets = [{ name: "WEBHOOK_SECRET", value }];
    const component = encodeURIComponent(value);
    const forms = [
      component,
      component.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()),
      component.replaceAll("%20", "+"),
      new URLSearchParams({ s: value }).toString().slice(2),
      new URLSearchParams({ s: value })
        .toString()
        .slice(2)
        .replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()),
    ];
    for (const form of forms) {
      expect(form).not.toContain(value);
      const patch = fileDiff("scripts/call.sh", [
        { at: 2, added: [`curl "https://hooks.example.com/in?secret=${form}&v=1"`] },
      ]);
      expect(scan(patch, secrets), form).toEqual([
        { where: "diff", file: "scripts/call.sh", line: 2, kind: "WEBHOOK_SECRET (URL-encoded)" },
      ]);
    }
  });

  test.each([
    ["lower case", toHex(anthropic)],
    ["upper case", toHex(anthropic).toUpperCase()],
  ])("hex, %s", (_label, hex) => {
    const patch = fileDiff("fixtures/dump.txt", [{ at: 5, added: [`payload 0x${hex} end`] }]);
    expect(scan(patch)).toEqual([
      { where: "diff", file: "fixtures/dump.txt", line: 5, kind: "ANTHROPIC_API_KEY (hex-encoded)" },
    ]);
  });

  test("split across lines by a JS string concatenation: reported where it starts", () => {
    const patch = fileDiff("src/client.ts", [
      {
        at: 20,
        added: [
          "const client = new Client({",
          `  apiKey: "${anthropic.slice(0, 30)}" +`,
          `    '${anthropic.slice(30, 61)}' +`,
          `    \`${anthropic.slice(61)}\`,`,
          "});",
        ],
      },
    ]);
    expect(scan(patch)).toEqual([
      { where: "diff", file: "src/client.ts", line: 21, kind: "ANTHROPIC_API_KEY (split across lines)" },
    ]);
  });

  test("split into 20-character lines, and with backslash continuations", () => {
    const chunks = anthropic.match(/.{1,20}/g) ?? [];
    const patch =
      fileDiff("key.txt", [{ at: 1, added: ["the key:", ...chunks] }], { newFile: true }) +
      fileDiff("run.sh", [{ at: 3, added: chunks.map((chunk) => `${chunk}\\`) }]);
    expect(scan(patch)).toEqual([
      { where: "diff", file: "key.txt", line: 2, kind: "ANTHROPIC_API_KEY (split across lines)" },
      { where: "diff", file: "run.sh", line: 3, kind: "ANTHROPIC_API_KEY (split across lines)" },
    ]);
  });

  test("halves in different files or hunks are each reported as a part of the value", () => {
    // A value with no well-known shape: half an `sk-ant-` key is also reported as a key's shape.
    const value = fakeToken("", 40);
    const patch =
      fileDiff("a.txt", [
        { at: 1, added: [value.slice(0, 20)] },
        { at: 9, added: [value.slice(20)] },
      ]) + fileDiff("b.txt", [{ at: 1, added: [value.slice(20)] }]);
    expect(scan(patch, [{ name: "WEBHOOK_SECRET", value }])).toEqual([
      { where: "diff", file: "a.txt", line: 1, kind: "WEBHOOK_SECRET (a part of it)" },
      { where: "diff", file: "b.txt", line: 1, kind: "WEBHOOK_SECRET (a part of it)" },
    ]);
  });

  test("removed lines are not pushed, so not reported", () => {
    const patch = fileDiff(".env", [
      {
        at: 2,
        removed: [`ANTHROPIC_API_KEY=${anthropic}`, toBase64(anthropic)],
        added: ["ANTHROPIC_API_KEY=${ANTHROPIC_API_KEY}"],
      },
    ]);
    expect(scan(patch)).toEqual([]);
  });

  test("an added line that starts with `++ ` (written `+++ `) is content, not a header", () => {
    const patch = fileDiff("notes.md", [{ at: 4, added: ["intro", `++ ${anthropic}`] }]);
    expect(scan(patch)).toEqual([{ where: "diff", file: "notes.md", line: 5, kind: "ANTHROPIC_API_KEY" }]);
  });

  test("values shorter than 8 characters, or only whitespace, are ignored", () => {
    const short = fakeToken("", 7);
    const patch = fileDiff("a.txt", [{ at: 1, added: [`short=${short}`, "          spaced          "] }]);
    expect(
      scan(patch, [
        { name: "SHORT", value: short },
        { name: "BLANK", value: "          " },
      ]),
    ).toEqual([]);
  });

  test("one finding per file and kind, at its first line", () => {
    const patch =
      fileDiff("a.env", [
        { at: 2, added: [`KEY=${anthropic}`, `AGAIN=${anthropic}`] },
        { at: 30, added: [`MORE=${anthropic}`, `B64=${toBase64(anthropic)}`] },
      ]) + fileDiff("b.env", [{ at: 8, added: [`KEY=${anthropic}`] }]);
    expect(scan(patch)).toEqual([
      { where: "diff", file: "a.env", line: 2, kind: "ANTHROPIC_API_KEY" },
      { where: "diff", file: "a.env", line: 31, kind: "ANTHROPIC_API_KEY (base64-encoded)" },
      { where: "diff", file: "b.env", line: 8, kind: "ANTHROPIC_API_KEY" },
    ]);
  });

  test("a value written as a whole PEM key is found however it is split", () => {
    const pem = fakePem(3);
    const secrets = [{ name: "GITHUB_APP_PRIVATE_KEY", value: pem }];
    const patch =
      fileDiff("config/app.json", [{ at: 3, added: ["{", `  "key": ${JSON.stringify(pem.trim())},`, "}"] }]) +
      fileDiff("key.pem", [{ at: 1, added: pem.trim().split("\n") }], { newFile: true });
    expect(scan(patch, secrets)).toEqual([
      { where: "diff", file: "config/app.json", line: 4, kind: "GITHUB_APP_PRIVATE_KEY" },
      { where: "diff", file: "key.pem", line: 1, kind: "GITHUB_APP_PRIVATE_KEY (split across lines)" },
    ]);
    // Unknown, the same key is still named by its shape.
    expect(scan(patch, [])).toEqual([
      { where: "diff", file: "config/app.json", line: 4, kind: "private key" },
      { where: "diff", file: "key.pem", line: 1, kind: "private key" },
    ]);
  });

  test("a new file named after the secret is a leak, and the name is masked in the finding", () => {
    const patch = fileDiff(`keys/${anthropic}.txt`, [{ at: 1, added: ["nothing here"] }], { newFile: true });
    const findings = scan(patch);
    expect(findings).toEqual([{ where: "diff", file: "keys/[REDACTED].txt", kind: "ANTHROPIC_API_KEY" }]);
  });

  test("paths are read as git writes them: quoted with octal escapes, or with spaces", () => {
    const quoted = [
      'diff --git "a/caf\\303\\251.env" "b/caf\\303\\251.env"',
      "index 6f1c2a4..9d0e7b3 100644",
      '--- "a/caf\\303\\251.env"',
      '+++ "b/caf\\303\\251.env"',
      "@@ -1,0 +2 @@",
      `+KEY=${anthropic}`,
    ].join("\n");
    const spaced = [
      "diff --git a/my dir/x.env b/my dir/x.env",
      "--- a/my dir/x.env\t",
      "+++ b/my dir/x.env\t",
      "@@ -0,0 +1 @@",
      `+KEY=${anthropic}`,
    ].join("\n");
    expect(scan(`${quoted}\n${spaced}\n`)).toEqual([
      { where: "diff", file: "caf\u00e9.env", line: 2, kind: "ANTHROPIC_API_KEY" },
      { where: "diff", file: "my dir/x.env", line: 1, kind: "ANTHROPIC_API_KEY" },
    ]);
  });

  test('commit messages: all their text, with where = "commit message"', () => {
    const patch = fileDiff("README.md", [{ at: 1, added: ["# Widgets"] }]);
    const messages = [
      "Add the README",
      `Configure the client\n\nThe key is ${toBase64(`key=${anthropic}`)}\n`,
      `Revert ${fakeToken("ghp_")}`,
    ];
    expect(scan(patch, [ANTHROPIC], messages)).toEqual([
      { where: "commit message", message: 1, line: 3, kind: "ANTHROPIC_API_KEY (base64-encoded)" },
      { where: "commit message", message: 2, line: 1, kind: "GitHub token" },
    ]);
  });
});

describe("scanForSecrets: well-known token shapes, value unknown", () => {
  const pemLines = fakePemLines(4);
  const awsSecret = fakeToken("", 40);
  const table: Array<[label: string, lines: string[], kind: string]> = [
    ...["ghp_", "gho_", "ghu_", "ghs_", "ghr_"].map((prefix): [string, string[], string] => [
      `GitHub ${prefix}`,
      [`token = "${fakeToken(prefix)}"`],
      "GitHub token",
    ]),
    ["GitHub fine-grained PAT", [`GH_TOKEN=${fakeToken("github_pat_", 82)}`], "GitHub token"],
    ["Anthropic", [`export ANTHROPIC_API_KEY='${fakeToken("sk-ant-api03-", 80, "url-safe")}'`], "Anthropic API key"],
    ["OpenAI project key", [`openai.api_key = "${fakeToken("sk-proj-", 80, "url-safe")}"`], "OpenAI API key"],
    ["OpenAI legacy key", [`OPENAI_API_KEY=${fakeToken("sk-", 48)}`], "OpenAI API key"],
    ["AWS access key id", [`aws_access_key_id = ${fakeToken("AKIA", 16, "upper")}`], "AWS access key id"],
    ["AWS temporary access key id", [`"AccessKeyId": "${fakeToken("ASIA", 16, "upper")}",`], "AWS access key id"],
    ["AWS secret key, ini", [`aws_secret_access_key = ${awsSecret}`], "AWS secret access key"],
    ["AWS secret key, JSON", [`"SecretAccessKey": "${awsSecret}",`], "AWS secret access key"],
    ["AWS secret key, env", [`export AWS_SECRET_ACCESS_KEY="${awsSecret}"`], "AWS secret access key"],
    ["Slack bot token", [`SLACK_TOKEN=${fakeToken("xoxb-", 12)}-${fakeToken("", 24)}`], "Slack token"],
    ["Daytona key", [`DAYTONA_API_KEY=${fakeToken("dtn_", 32)}`], "Daytona API key"],
    ["PEM private key", ["# deploy key", pemLines.header, ...pemLines.body, pemLines.footer], "private key"],
    [
      "PEM private key, encrypted, with RFC 1421 fields",
      [
        "# deploy key",
        pemLines.header,
        "Proc-Type: 4,ENCRYPTED",
        `DEK-Info: AES-128-CBC,${randomBytes(16).toString("hex").toUpperCase()}`,
        "",
        ...pemLines.body,
        pemLines.footer,
      ],
      "private key",
    ],
    [
      "PEM private key in comments",
      ["# deploy key", ...[pemLines.header, ...pemLines.body, pemLines.footer].map((line) => `# ${line}`)],
      "private key",
    ],
    [
      "PEM private key in a JS string",
      [
        "# deploy key",
        `const key = "${pemLines.header}\\n" +`,
        ...pemLines.body.map((line) => `  "${line}\\n" +`),
        `  "${pemLines.footer}";`,
      ],
      "private key",
    ],
  ];

  test.each(table)("%s", (_label, lines, kind) => {
    const patch = fileDiff("config/settings.txt", [{ at: 11, added: ["# settings", ...lines] }]);
    const line = lines[0]?.startsWith("#") ? 13 : 12;
    expect(scan(patch, [])).toEqual([{ where: "diff", file: "config/settings.txt", line, kind }]);
  });

  test("a shape that is a known value is reported once, under the value's name", () => {
    const token = fakeToken("ghs_");
    const patch = fileDiff("a.sh", [{ at: 1, added: [`git clone https://x-access-token:${token}@github.com/o/r`] }]);
    expect(scan(patch, [{ name: "GITHUB_TOKEN", value: token }])).toEqual([
      { where: "diff", file: "a.sh", line: 1, kind: "GITHUB_TOKEN" },
    ]);
  });
});

describe("scanForSecrets: no false positives on ordinary changes", () => {
  const tenSecrets: KnownSecret[] = [
    ANTHROPIC,
    { name: "GITHUB_TOKEN", value: fakeToken("ghs_") },
    { name: "OPENAI_API_KEY", value: fakeToken("sk-proj-", 80, "url-safe") },
    { name: "DAYTONA_API_KEY", value: fakeToken("dtn_", 32) },
    { name: "WEBHOOK_SECRET", value: randomBytes(20).toString("hex") },
    { name: "SESSION_SECRET", value: randomBytes(32).toString("base64") },
    { name: "AWS_ACCESS_KEY_ID", value: fakeToken("AKIA", 16, "upper") },
    { name: "AWS_SECRET_ACCESS_KEY", value: fakeToken("", 40) },
    { name: "SLACK_TOKEN", value: `${fakeToken("xoxb-", 12)}-${fakeToken("", 24)}` },
    { name: "PRIVATE_KEY", value: fakePem(3) },
  ];

  test("a README and TypeScript change that talks about tokens and keys", () => {
    const pemHeader = fakePemLines(1).header;
    const patch =
      fileDiff("README.md", [
        {
          at: 40,
          removed: ["Set the token in `.env`."],
          added: [
            "## Configuration",
            "",
            "Set `ANTHROPIC_API_KEY` to your API key, and `GITHUB_TOKEN` to a token with `contents: write`.",
            `The secret key = value pairs go in \`.env\`; see \`.env.example\` (e.g. \`ghp_${"x".repeat(36)}\`).`,
            `AWS keys look like \`${["AKIA", "IOSFODNN7", "EXAMPLE"].join("")}\`; never commit one.`,
            "Run `pip install scikit-learn` (imported as sk-learn-model-selection-and-tuning-helpers).",
          ],
        },
      ]) +
      fileDiff("src/auth/token.ts", [
        {
          at: 12,
          added: [
            'import { createHash } from "node:crypto";',
            "",
            "/** Reads the API key from the environment; the token never reaches the logs. */",
            "export function apiKey(env: NodeJS.ProcessEnv): string {",
            '  const key = env["ANTHROPIC_API_KEY"] ?? "";',
            '  if (key === "") throw new Error("ANTHROPIC_API_KEY is not set");',
            "  return key;",
            "}",
            "",
            "export const aws = { secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY, region: 'eu-west-1' };",
            `export const PEM_HEADER = "${pemHeader}";`,
            "export function isPem(text: string): boolean {",
            "  return text.trimStart().startsWith(PEM_HEADER);",
            "}",
            `const digest = createHash("sha256").update("key = value").digest("hex"); ` +
              `// ${randomBytes(32).toString("hex")}`,
            `const commit = "${randomBytes(20).toString("hex")}";`,
            `const image = "data:image/png;base64,${randomBytes(600).toString("base64")}";`,
            "const task_runner = 'task-runner-for-the-disk-encryption-key-rotation';",
          ],
        },
      ]);
    expect(
      scan(patch, tenSecrets, [
        "Read the API key from the environment\n\nThe token and secret key = value docs move to the README.",
      ]),
    ).toEqual([]);
  });
});

describe("findings never contain the value", () => {
  test("not the value, nor its encodings, nor any 6-character piece of it", () => {
    const lines = [
      `KEY=${anthropic}`,
      `B64=${toBase64(`x${anthropic}`)}`,
      `HEX=${toHex(anthropic)}`,
      `URL=${encodeURIComponent(`${anthropic}&`)}`,
      `"${anthropic.slice(0, 40)}" +`,
      `"${anthropic.slice(40)}"`,
    ];
    const patch =
      fileDiff(`leaked/${anthropic}/x.txt`, [{ at: 1, added: lines }], { newFile: true }) +
      fileDiff(`${toBase64(anthropic)}.txt`, [{ at: 1, added: lines }], { newFile: true });
    const findings = scan(patch, [ANTHROPIC], [`subject ${anthropic}`, toHex(anthropic)]);
    expect(findings.length).toBeGreaterThanOrEqual(10);
    const json = JSON.stringify(findings);
    for (const form of formsOf(anthropic)) expect(json).not.toContain(form);
    for (const piece of windowsOf(anthropic, 6)) expect(json).not.toContain(piece);
  });
});

describe("maskSecrets", () => {
  const pem = fakePem(3);
  const secrets: KnownSecret[] = [ANTHROPIC, { name: "DEPLOY_KEY", value: pem }];
  const unknownToken = fakeToken("ghp_");
  const chunks = anthropic.match(/.{1,20}/g) ?? [];
  const commentedLines = fakePemLines(2);
  const commentedPem = [commentedLines.header, ...commentedLines.body, commentedLines.footer];
  const patch =
    `From 1234abcd Mon Sep 17 00:00:00 2001\n` +
    `Subject: [PATCH] Configure ${anthropic.slice(0, 50)}\n ${anthropic.slice(50)}\n\n` +
    fileDiff(".env", [
      { at: 2, removed: [`OLD=${anthropic}`, ...chunks], added: ["PORT=3000", `KEY=${anthropic}`, "DEBUG=1"] },
    ]) +
    fileDiff("blob.txt", [
      {
        at: 1,
        added: [
          ...[0, 1, 2].map((lead) => toBase64(`${"q".repeat(lead)}${anthropic}!`)),
          Buffer.from(`ab${anthropic}`).toString("base64url").replace(/=+$/, ""),
          toHex(anthropic),
          toHex(anthropic).toUpperCase(),
          encodeURIComponent(`${anthropic}/x y`),
          new URLSearchParams({ k: `${anthropic} z` }).toString(),
          `token: ${unknownToken}`,
        ],
      },
    ]) +
    fileDiff("src/k.ts", [
      {
        at: 5,
        added: ["const key =", `  "${anthropic.slice(0, 33)}" +`, `  "${anthropic.slice(33)}";`, "export default key;"],
      },
    ]) +
    fileDiff("deploy.pem", [{ at: 1, added: pem.trimEnd().split("\n") }], { newFile: true }) +
    fileDiff("other.pem", [{ at: 1, added: fakePem(2).trimEnd().split("\n") }], { newFile: true }) +
    fileDiff("notes.sh", [{ at: 1, added: ["# old key:", ...commentedPem.map((line) => `# ${line}`), "echo done"] }]);

  test("leaves no form of a secret, and nothing left to find", () => {
    const masked = maskSecrets(patch, secrets);
    for (const form of [...formsOf(anthropic), ...formsOf(pem)]) expect(masked).not.toContain(form);
    for (const lead of [0, 1, 2])
      expect(masked).not.toContain(toBase64(`${"q".repeat(lead)}${anthropic}`).slice(4, -4));
    for (const piece of windowsOf(anthropic, 24))
      expect(masked.replace(/[\s"'+\\-]/g, "")).not.toContain(piece.replace(/-/g, ""));
    expect(masked).not.toContain(unknownToken);
    for (const line of pem.trim().split("\n").slice(1, -1)) expect(masked).not.toContain(line);
    expect(scan(masked, secrets)).toEqual([]);
  });

  test("keeps the rest of the patch as it was, line for line", () => {
    const masked = maskSecrets(patch, secrets);
    const before = patch.split("\n");
    const after = masked.split("\n");
    expect(after).toHaveLength(before.length);
    after.forEach((line, index) => {
      if (line.includes("[REDACTED]")) return;
      expect(line).toBe(before[index]);
    });
    expect(after).toContain("+KEY=[REDACTED]");
    expect(after).toContain("+PORT=3000");
    expect(after).toContain('+  "[REDACTED]" +');
    expect(after).toContain('+  "[REDACTED]";');
    expect(after).toContain(`+token: [REDACTED]`);
    expect(after.filter((line) => line === "+export default key;")).toHaveLength(1);
    expect(after.slice(-7)).toEqual([
      "+# old key:",
      "+# [REDACTED]",
      "+# [REDACTED]",
      "+# [REDACTED]",
      "+# [REDACTED]",
      "+echo done",
      "",
    ]);
    expect(maskSecrets(masked, secrets)).toBe(masked);
  });

  test("text without secrets comes back unchanged", () => {
    const text = fileDiff("README.md", [{ at: 1, added: ["The token goes in `.env`: key = value."] }]);
    expect(maskSecrets(text, secrets)).toBe(text);
    expect(maskSecrets("", secrets)).toBe("");
  });

  test("a commit message", () => {
    expect(maskSecrets(`Use the key\n\n${anthropic}\n`, secrets)).toBe("Use the key\n\n[REDACTED]\n");
  });
});

describe("bounded cost", () => {
  const tenSecrets: KnownSecret[] = [
    ANTHROPIC,
    ...Array.from({ length: 9 }, (_, i) => ({
      name: `SECRET_${String(i)}`,
      value: i % 3 === 0 ? fakeToken("ghs_") : i % 3 === 1 ? fakePem(2) : fakeToken("key-", 40, "url-safe"),
    })),
  ];
  const MB = 1024 * 1024;
  /** `+` lines built from `unit` until the patch is about 1 MB. */
  function hostile(unit: string, lineLength = 200): string {
    const line = `+${unit.repeat(Math.ceil(lineLength / unit.length)).slice(0, lineLength)}`;
    const count = Math.ceil(MB / (line.length + 1));
    return `diff --git a/h b/h\n--- a/h\n+++ b/h\n@@ -0,0 +1,${String(count)} @@\n${`${line}\n`.repeat(count)}`;
  }
  function oneLine(unit: string): string {
    return `diff --git a/h b/h\n--- a/h\n+++ b/h\n@@ -0,0 +1 @@\n+${unit.repeat(Math.ceil(MB / unit.length))}\n`;
  }
  const base64Run = randomBytes(MB).toString("base64").slice(0, MB);
  const cases: Array<[label: string, make: () => string]> = [
    ["key-key-key- on one line", () => oneLine("key-")],
    ["key-key-key- on many lines", () => hostile("key-")],
    ["a 1 MB base64-looking run", () => `diff --git a/h b/h\n--- a/h\n+++ b/h\n@@ -0,0 +1 @@\n+${base64Run}\n`],
    ["AAAA…", () => oneLine("A")],
    ["lines of repeated quotes", () => hostile(`"'\`"'+`)],
    ["quotes and joiners only, on one line", () => oneLine(`"' + \\. ,`)],
    ["a known secret's prefix repeated", () => hostile(anthropic.slice(0, 20))],
    ["a known secret's base64, less its last character, repeated", () => oneLine(toBase64(anthropic).slice(0, 100))],
    ["ghp_ghp_…", () => oneLine("ghp_")],
    ["sk-sk-sk-…", () => oneLine("sk-")],
    ["PEM headers without a body", () => oneLine(`${fakePemLines(1).header} `)],
    ["PEM headers, each with a body", () => hostile(`${fakePemLines(1).header}${fakePemLines(1).body.join("")}`, 400)],
    ["secret_access_key= repeated", () => oneLine("secret_access_key = ")],
    ["AKIA…", () => oneLine("AKIA")],
    ["xoxb-…", () => oneLine("xoxb-")],
    ["tiny lines", () => hostile("+", 1)],
    [
      "tiny hunks",
      () => Array.from({ length: 60_000 }, (_, i) => `@@ -${String(i)},0 +${String(i + 1)} @@\n+"x"`).join("\n"),
    ],
  ];

  test.each(cases)("scanning 1 MB of hostile input takes under 2 s: %s", (_label, make) => {
    const patch = make();
    expect(patch.length).toBeGreaterThan(MB * 0.9);
    const started = performance.now();
    scanForSecrets({ patch, messages: [patch.slice(0, MB / 4)], secrets: tenSecrets });
    const scanned = performance.now() - started;
    expect(scanned).toBeLessThan(2000);
    const maskStarted = performance.now();
    maskSecrets(patch, tenSecrets);
    expect(performance.now() - maskStarted).toBeLessThan(4000);
  });

  test("a realistic 2 MB patch with 10 known secrets scans quickly and finds the planted ones", () => {
    const words = [
      "const",
      "value",
      "token",
      "key",
      "config",
      "request",
      "await",
      "return",
      "export",
      "function",
      "string",
      "number",
      "result",
      "error",
    ];
    const word = (): string => words[randomInt(words.length)] ?? "x";
    const files: string[] = [];
    let size = 0;
    for (let f = 0; size < 2 * MB; f++) {
      const added = Array.from(
        { length: 150 },
        (_, i) =>
          `  ${word()} ${word()}${String(i)} = ` +
          `${word()}("${word()}-${randomBytes(6).toString("hex")}", ${String(i)}); ` +
          `// ${word()} ${word()} ${word()}`,
      );
      if (f === 40) added[17] = `  apiKey: "${anthropic}",`;
      if (f === 80) added[99] = `  blob: "${toBase64(`{"k":"${tenSecrets[3]?.value ?? ""}"}`)}",`;
      const file = fileDiff(`src/module${String(f)}.ts`, [
        { at: 1, added, removed: added.slice(0, 20).map((line) => line.replace("const", "let")) },
      ]);
      files.push(file);
      size += file.length;
    }
    const patch = files.join("");
    const started = performance.now();
    const findings = scanForSecrets({
      patch,
      messages: ["Refactor the modules\n\nNo functional change."],
      secrets: tenSecrets,
    });
    const elapsed = performance.now() - started;
    expect(findings).toEqual([
      { where: "diff", file: "src/module40.ts", line: 18, kind: "ANTHROPIC_API_KEY" },
      { where: "diff", file: "src/module80.ts", line: 100, kind: `${tenSecrets[3]?.name ?? ""} (base64-encoded)` },
    ]);
    expect(elapsed).toBeLessThan(3000);
  });
});
