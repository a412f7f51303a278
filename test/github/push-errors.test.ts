import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import {
  classifyPushError,
  workflowPermissionError,
  type ClassifiedPushError,
  type PushFailureKind,
} from "../../src/github/push-errors.js";
import { gitEnv } from "../../src/sandbox/environment.js";
import { runProcess } from "../../src/sandbox/process.js";
import {
  blockSecrets,
  closedPortUrl,
  enforceRepositoryRules,
  limitFileSize,
  moveBranch,
  protectBranch,
  refusals,
  requireWorkflowsPermission,
  startGitHubLikeServer,
  type GitHubLikeServer,
} from "../fakes/github-git-rejections.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

// Shaped like an installation token (split so secret scanners do not flag the fixture).
const TOKEN = fakeToken("ghs_", 36);
const WRONG_TOKEN = fakeToken("ghs_", 36);
const REPO = "acme/widgets";

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Remote {
  server: GitHubLikeServer;
  /** The bare repository the server serves as acme/widgets. */
  bare: string;
  /** A clone of it on `main`, to commit in and push from. */
  work: string;
  url: string;
}

async function remote(): Promise<Remote> {
  const dir = await scratchDir("harness-push-errors-");
  cleanups.push(dir.cleanup);
  const root = join(dir.path, "srv");
  const bare = await makeBareRepo(root, "acme", "widgets");
  const server = await startGitHubLikeServer({ projectRoot: root, token: TOKEN });
  cleanups.push(() => server.close());
  const work = join(dir.path, "work");
  git(dir.path, "clone", "--quiet", bare, work);
  return { server, bare, work, url: server.repoUrl(REPO) };
}

async function commit(work: string, path: string, content: string | Buffer = `${path}\n`): Promise<void> {
  await mkdir(dirname(join(work, path)), { recursive: true });
  await writeFile(join(work, path), content);
  git(work, "add", path);
  git(work, "commit", "--quiet", "-m", `Change ${path}`);
}

/**
 * Pushes the way Harness does (token only in the environment of this one git process, no user
 * config, no prompts) and returns everything git printed. LC_ALL=C keeps git's own messages in
 * English whatever the machine's locale.
 */
async function push(
  work: string,
  url: string,
  refspec: string,
  token: string | undefined,
): Promise<{ exitCode: number; output: string }> {
  const env = gitEnv(token, { ...process.env, LC_ALL: "C" });
  const result = await runProcess({ argv: ["git", "push", url, refspec], cwd: work, env, timeout: 10_000 });
  return { exitCode: result.exitCode, output: result.stdout + result.stderr };
}

/** A failed push, classified; the assertions every class shares. */
async function rejected(
  work: string,
  url: string,
  refspec: string,
  token: string | undefined = TOKEN,
): Promise<ClassifiedPushError & { output: string }> {
  const { exitCode, output } = await push(work, url, refspec, token);
  expect(exitCode, output).not.toBe(0);
  const classified = classifyPushError(output, [token]);
  expect(classified.remedy).not.toBe("");
  expect(classified.summary).not.toMatch(/\n/);
  expect(classified.remedy).not.toMatch(/\n/);
  return { ...classified, output };
}

describe("classifyPushError on what real git prints", () => {
  test("auth: a wrong token in the http.extraHeader makes git ask for a username it cannot prompt for", async () => {
    const { work, url } = await remote();
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:refs/heads/harness/a", WRONG_TOKEN);
    expect(result.output).toMatch(/could not read Username for 'http:\/\/127\.0\.0\.1:\d+': terminal prompts disabled/);
    expect(result.kind).toBe("auth");
    expect(result.summary).toContain("127.0.0.1");
  });

  test("auth: a wrong token in the URL shows GitHub's 401 body, and the token is not repeated", async () => {
    const { work, url } = await remote();
    await commit(work, "a.txt");
    const withCredentials = url.replace("http://", `http://x-access-token:${WRONG_TOKEN}@`);
    // No token in the environment: an http.extraHeader would override the URL's credentials.
    const { exitCode, output } = await push(work, withCredentials, "HEAD:refs/heads/harness/a", undefined);
    expect(exitCode).not.toBe(0);
    const result = { ...classifyPushError(output), output };
    expect(result.output).toContain(
      "remote: Invalid username or token. Password authentication is not supported for Git operations.",
    );
    expect(result.kind).toBe("auth");
    expect(result.summary).toContain(REPO);
    expect(result.summary).toContain("Invalid username or token");
    expect(`${result.summary} ${result.remedy}`).not.toContain(WRONG_TOKEN);
  });

  test("permission: a 403 naming the denied identity", async () => {
    const { server, work, url } = await remote();
    server.refusePush(REPO, refusals.permission(REPO, "harness[bot]"));
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:refs/heads/harness/a");
    expect(result.output).toContain("remote: Permission to acme/widgets.git denied to harness[bot].");
    expect(result.kind).toBe("permission");
    expect(result.summary).toContain("harness[bot]");
    expect(result.summary).toContain(REPO);
  });

  test("permission: a token without write access", async () => {
    const { server, work, url } = await remote();
    server.refusePush(REPO, refusals.writeAccessNotGranted());
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:refs/heads/harness/a");
    expect(result.kind).toBe("permission");
    expect(result.summary).toContain(REPO);
  });

  test("protected branch, current format; other branches still take pushes", async () => {
    const { bare, work, url } = await remote();
    await protectBranch(bare, { branch: "main" });
    await commit(work, "a.txt");
    const result = await rejected(work, url, "main");
    expect(result.output).toMatch(/^ ! \[remote rejected\] main -> main \(protected branch hook declined\)$/m);
    expect(result.output).toMatch(
      /^remote: error: GH006: Protected branch update failed for refs\/heads\/main\. {8}$/m,
    );
    expect(result.kind).toBe("protected_branch");
    expect(result.summary).toContain("main is a protected branch");
    expect(result.summary).toContain("Changes must be made through a pull request");
    expect((await push(work, url, "HEAD:refs/heads/harness/a", TOKEN)).exitCode).toBe(0);
  });

  test("protected branch, legacy one-line format", async () => {
    const { bare, work, url } = await remote();
    await protectBranch(bare, {
      branch: "main",
      format: "legacy",
      rules: ["At least one approved review is required."],
    });
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:main");
    expect(result.kind).toBe("protected_branch");
    expect(result.summary).toContain("At least one approved review is required");
  });

  test(
    "workflows: a GitHub App pushing .github/workflows/ci.yml; " + "a push without workflow files goes through",
    async () => {
      const { bare, work, url } = await remote();
      await requireWorkflowsPermission(bare);
      await commit(work, "src/a.txt");
      expect((await push(work, url, "HEAD:refs/heads/harness/ok", TOKEN)).exitCode).toBe(0);
      await commit(work, ".github/workflows/ci.yml", "on: push\n");
      const result = await rejected(work, url, "HEAD:refs/heads/harness/ci");
      expect(result.output).toContain(
        "(refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without " +
          "`workflows` permission)",
      );
      expect(result.kind).toBe("workflows");
      expect(result.summary).toContain(".github/workflows/ci.yml");
      expect(result.summary).toContain("harness/ci");
      expect(result.remedy).toContain("Workflows: write");
    },
  );

  test("workflows: a personal access token needs the workflow scope", async () => {
    const { bare, work, url } = await remote();
    await requireWorkflowsPermission(bare, "Personal Access Token");
    await commit(work, ".github/workflows/release.yaml", "on: push\n");
    const result = await rejected(work, url, "HEAD:refs/heads/harness/ci");
    expect(result.kind).toBe("workflows");
    expect(result.summary).toContain(".github/workflows/release.yaml");
    expect(result.remedy).toContain("`workflow` scope");
  });

  test("non-fast-forward: the remote branch moved to a commit the client never saw (fetch first)", async () => {
    const { bare, work, url } = await remote();
    moveBranch(bare, "main");
    await commit(work, "a.txt");
    const result = await rejected(work, url, "main");
    expect(result.output).toContain("(fetch first)");
    expect(result.kind).toBe("non_fast_forward");
    expect(result.summary).toContain("main");
  });

  test("non-fast-forward: the client has the moved commit but its branch diverged", async () => {
    const { bare, work, url } = await remote();
    moveBranch(bare, "main");
    git(work, "fetch", "--quiet", bare, "main");
    await commit(work, "a.txt");
    const result = await rejected(work, url, "main");
    expect(result.output).toContain("(non-fast-forward)");
    expect(result.kind).toBe("non_fast_forward");
  });

  test("file too large: GH001 from a pre-receive hook, with file name and size", async () => {
    const { bare, work, url } = await remote();
    await limitFileSize(bare, 1024 * 1024);
    await commit(work, "assets/big.bin", Buffer.alloc(1.5 * 1024 * 1024));
    const result = await rejected(work, url, "HEAD:refs/heads/harness/big");
    expect(result.output).toContain("(pre-receive hook declined)");
    expect(result.kind).toBe("file_too_large");
    expect(result.summary).toContain("assets/big.bin is 1.50 MB");
    expect(result.summary).toContain("1.00 MB");
  });

  test("repository rules: GH013 ruleset violations", async () => {
    const { bare, work, url } = await remote();
    await enforceRepositoryRules(bare, { branch: "main" });
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:main");
    expect(result.output).toContain("(push declined due to repository rule violations)");
    expect(result.kind).toBe("repository_rules");
    expect(result.summary).toContain("main");
    expect(result.summary).toContain("Cannot force-push to this branch");
  });

  test("repository rules: GH013 secret-scanning push protection names the secret's type and location", async () => {
    const { bare, work, url } = await remote();
    await blockSecrets(bare);
    const secret = fakeToken("ghp_", 36);
    await commit(work, ".env", `DEBUG=1\nGITHUB_TOKEN=${secret}\n`);
    const result = await rejected(work, url, "HEAD:refs/heads/harness/env");
    expect(result.output).toContain("- GITHUB PUSH PROTECTION");
    expect(result.kind).toBe("repository_rules");
    expect(result.summary).toContain("GitHub Personal Access Token at .env:2");
    expect(result.remedy).toMatch(/secret/i);
    expect(`${result.summary} ${result.remedy}`).not.toContain(secret);
  });

  test("not found: GitHub's 404 body", async () => {
    const { server, work, url } = await remote();
    server.refusePush(REPO, refusals.notFound());
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:refs/heads/harness/a");
    expect(result.output).toContain("remote: Repository not found.");
    expect(result.kind).toBe("not_found");
    expect(result.summary).toContain(REPO);
  });

  test("not found: a repository the server does not have at all", async () => {
    const { server, work } = await remote();
    await commit(work, "a.txt");
    const result = await rejected(work, server.repoUrl("acme/missing"), "HEAD:refs/heads/harness/a");
    expect(result.kind).toBe("not_found");
    expect(result.summary).toContain("acme/missing");
  });

  test("archived: a 403 saying the repository is read-only", async () => {
    const { server, work, url } = await remote();
    server.refusePush(REPO, refusals.archived());
    await commit(work, "a.txt");
    const result = await rejected(work, url, "HEAD:refs/heads/harness/a");
    expect(result.kind).toBe("archived");
    expect(result.summary).toContain(`${REPO} is archived`);
  });

  test("network: nothing listens on the port", async () => {
    const { work } = await remote();
    await commit(work, "a.txt");
    const url = `${await closedPortUrl()}/${REPO}.git`;
    const result = await rejected(work, url, "HEAD:refs/heads/harness/a");
    expect(result.output).toContain("Failed to connect to 127.0.0.1");
    expect(result.kind).toBe("network");
    expect(result.summary).toContain("127.0.0.1");
  });
});

// ---------------------------------------------------------------------------------------------
// Verbatim outputs pasted from GitHub issue threads (sources in /work/scratch/github-push-errors.md).

interface Pasted {
  name: string;
  kind: PushFailureKind;
  /** Facts the summary must carry. */
  facts: string[];
  lines: string[];
}

const PASTED: Pasted[] = [
  // Auth (HTTP 401 on info/refs): old wording, current wording, account password.
  {
    name: "auth, old wording",
    kind: "auth",
    facts: ["kr14official/kr14-V.2.0", "Invalid username or password"],
    lines: [
      "remote: Invalid username or password.",
      "fatal: Authentication failed for 'https://github.com/kr14official/kr14-V.2.0.git/'",
    ],
  },
  {
    name: "auth, current wording",
    kind: "auth",
    facts: ["astropy/astropy"],
    lines: [
      "remote: Invalid username or token. Password authentication is not supported for Git operations.",
      "fatal: Authentication failed for 'https://github.com/astropy/astropy.git/'",
    ],
  },
  {
    name: "auth, account password",
    kind: "auth",
    facts: ["Bushan101/sss", "password authentication was removed"],
    lines: [
      "remote: Support for password authentication was removed on August 13, 2021.",
      "remote: Please see https://docs.github.com/get-started/getting-started-with-git/about-remote-repositories#cloning-with-https-urls for information on currently recommended modes of authentication.",
      "fatal: Authentication failed for 'https://github.com/Bushan101/sss.git/'",
    ],
  },
  {
    name: "auth, no credentials and prompts disabled",
    kind: "auth",
    facts: ["https://github.com"],
    lines: ["fatal: could not read Username for 'https://github.com': terminal prompts disabled"],
  },
  // Permission (HTTP 403 on info/refs, or SSH).
  {
    name: "permission, user",
    kind: "permission",
    facts: ["skanwal", "common-workflow-language/cwl-website"],
    lines: [
      "info: please complete authentication in your browser...",
      "remote: Permission to common-workflow-language/cwl-website.git denied to skanwal.",
      "fatal: unable to access 'https://github.com/common-workflow-language/cwl-website.git/': The requested URL returned error: 403",
    ],
  },
  {
    name: "permission, github-actions[bot]",
    kind: "permission",
    facts: ["github-actions[bot]", "zzc8081/yarb"],
    lines: [
      "remote: Permission to zzc8081/yarb.git denied to github-actions[bot].",
      "fatal: unable to access 'https://github.com/zzc8081/yarb.git/': The requested URL returned error: 403",
    ],
  },
  {
    name: "permission, GitHub App",
    kind: "permission",
    facts: ["renovate[bot]", "redkubes/otomi-tasks"],
    lines: [
      "Pushing to https://github.com/redkubes/otomi-tasks.git",
      "remote: Permission to redkubes/otomi-tasks.git denied to renovate[bot].",
      "fatal: unable to access 'https://github.com/redkubes/otomi-tasks.git/': The requested URL returned error: 403",
    ],
  },
  {
    name: "permission, token without write scope",
    kind: "permission",
    facts: ["phrutos/myrepo"],
    lines: [
      "remote: Write access to repository not granted.",
      "fatal: unable to access 'https://github.com/phrutos/myrepo/': The requested URL returned error: 403",
    ],
  },
  {
    name: "permission, SSH",
    kind: "permission",
    facts: ["user", "o/r"],
    lines: [
      "ERROR: Permission to o/r.git denied to user.",
      "fatal: Could not read from remote repository.",
      "",
      "Please make sure you have the correct access rights",
      "and the repository exists.",
    ],
  },
  {
    name: "permission, SSH write access",
    kind: "permission",
    facts: ["no write access"],
    lines: ["ERROR: Write access to repository not granted.", "fatal: Could not read from remote repository."],
  },
  {
    name: "permission, 403 on the pack upload hides the body",
    kind: "permission",
    facts: ["HTTP 403"],
    lines: [
      "error: RPC failed; HTTP 403 curl 22 The requested URL returned error: 403",
      "send-pack: unexpected disconnect while reading sideband packet",
      "fatal: the remote end hung up unexpectedly",
      "Everything up-to-date",
    ],
  },
  // Protected branch (GH006).
  {
    name: "protected branch, current format over SSH",
    kind: "protected_branch",
    facts: ["main is a protected branch", "Changes must be made through a pull request"],
    lines: [
      "remote: Resolving deltas: 100% (5/5), completed with 3 local objects.",
      "remote: error: GH006: Protected branch update failed for refs/heads/main.",
      "remote: ",
      "remote: - Changes must be made through a pull request.",
      "To github.com:foundry-rs/block-explorers.git",
      " ! [remote rejected] main -> main (protected branch hook declined)",
      "error: failed to push some refs to 'github.com:foundry-rs/block-explorers.git'",
    ],
  },
  {
    name: "protected branch, two bullets",
    kind: "protected_branch",
    facts: ["main", "You're not authorized to push to this branch"],
    lines: [
      "remote: error: GH006: Protected branch update failed for refs/heads/main.",
      "remote: ",
      "remote: - Changes must be made through a pull request.",
      "remote: - You're not authorized to push to this branch. Visit https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches for more information.",
      " ! [remote rejected] main -> main (protected branch hook declined)",
    ],
  },
  {
    name: "protected branch, legacy format",
    kind: "protected_branch",
    facts: ["dev is a protected branch", "Changes must be made through a pull request"],
    lines: [
      "remote: error: GH006: Protected branch update failed for refs/heads/dev.",
      "remote: error: Changes must be made through a pull request.",
      "To https://github.com/Maersk-Global/ifsapp10-customer-solution.git",
      " ! [remote rejected] dev -> dev (protected branch hook declined)",
    ],
  },
  {
    name: "protected branch, legacy status check",
    kind: "protected_branch",
    facts: ['Required status check "DCO" is expected'],
    lines: [
      "remote: error: GH006: Protected branch update failed for refs/heads/master.",
      'remote: error: Required status check "DCO" is expected.',
      " ! [remote rejected] master -> master (protected branch hook declined)",
    ],
  },
  {
    name: "protected branch, status line only",
    kind: "protected_branch",
    facts: ["main is a protected branch"],
    lines: [
      " ! [remote rejected] HEAD -> main (protected branch hook declined)",
      "error: failed to push some refs to 'https://github.com/ietf-tools/xml2rfc.git'",
    ],
  },
  // Workflows: GitHub App, OAuth App, classic PAT.
  {
    name: "workflows, GitHub App",
    kind: "workflows",
    facts: [".github/workflows/reprod-documentation-workflow.yml", "main"],
    lines: [
      "To https://github.com/damianooldoni/test-workflows",
      " ! [remote rejected] main -> main (refusing to allow a GitHub App to create or update workflow " +
        "`.github/workflows/reprod-documentation-workflow.yml` without `workflows` permission)",
      "error: failed to push some refs to 'https://github.com/damianooldoni/test-workflows'",
    ],
  },
  {
    name: "workflows, OAuth App",
    kind: "workflows",
    facts: [".github/workflows/validation.yml", "master"],
    lines: [
      "Total 0 (delta 0), reused 0 (delta 0)",
      "To https://github.com/IvanBil/PowerPlatformConnectors",
      " ! [remote rejected] master -> master (refusing to allow an OAuth App to create or update workflow " +
        "`.github/workflows/validation.yml` without `workflow` scope)",
    ],
  },
  {
    name: "workflows, classic PAT",
    kind: "workflows",
    facts: [".github/workflows/release.yaml"],
    lines: [
      "remote: Resolving deltas: 100% (14/14), completed with 7 local objects.",
      "To https://github.com/oiooj/categraf.git",
      " ! [remote rejected] main -> main (refusing to allow a Personal Access Token to create or update " +
        "workflow `.github/workflows/release.yaml` without `workflow` scope)",
      "error: failed to push some refs to 'https://github.com/oiooj/categraf.git'",
    ],
  },
  // Non-fast-forward (client-side).
  {
    name: "fetch first",
    kind: "non_fast_forward",
    facts: ["main", "fetch first"],
    lines: [
      "To ../srv.git",
      " ! [rejected]        main -> main (fetch first)",
      "error: failed to push some refs to '../srv.git'",
      "hint: Updates were rejected because the remote contains work that you do",
      "hint: not have locally. This is usually caused by another repository pushing",
      "hint: to the same ref. You may want to first integrate the remote changes",
      "hint: (e.g., 'git pull ...') before pushing again.",
      "hint: See the 'Note about fast-forwards' in 'git push --help' for details.",
    ],
  },
  {
    name: "non-fast-forward",
    kind: "non_fast_forward",
    facts: ["main", "non-fast-forward"],
    lines: [
      " ! [rejected]        main -> main (non-fast-forward)",
      "error: failed to push some refs to '../srv.git'",
      "hint: Updates were rejected because the tip of your current branch is behind",
      "hint: its remote counterpart. Integrate the remote changes (e.g.",
      "hint: 'git pull ...') before pushing again.",
      "hint: See the 'Note about fast-forwards' in 'git push --help' for details.",
    ],
  },
  {
    name: "fetch first, newer hint wording",
    kind: "non_fast_forward",
    facts: ["main"],
    lines: [
      " ! [rejected]        main -> main (fetch first)",
      "hint: Updates were rejected because the remote contains work that you do not",
      "hint: have locally. This is usually caused by another repository pushing to",
      "hint: the same ref. If you want to integrate the remote changes, use",
      "hint: 'git pull' before pushing again.",
    ],
  },
  {
    name: "non-fast-forward, wide column",
    kind: "non_fast_forward",
    facts: ["passed"],
    lines: [
      " ! [rejected]            passed -> passed (non-fast-forward)",
      "hint: Updates were rejected because a pushed branch tip is behind its remote",
    ],
  },
  // File too large (GH001).
  {
    name: "GH001, current order",
    kind: "file_too_large",
    facts: ["images/reserves/drive-download-20260817T221619Z-1-001.zip is 301.74 MB", "100.00 MB"],
    lines: [
      "remote: Resolving deltas: 100% (22/22), completed with 13 local objects.",
      "remote: error: Trace: 654c8d72f32f9965c4734092a2fb75d32fe2a39f6d10881c1465db48addc3ea4",
      "remote: error: See https://gh.io/lfs for more information.",
      "remote: error: File images/reserves/drive-download-20260817T221619Z-1-001.zip is 301.74 MB; " +
        "this exceeds GitHub's file size limit of 100.00 MB",
      "remote: error: GH001: Large files detected. You may want to try Git Large File Storage - https://git-lfs.github.com/.",
      "To github.com:babfave000/Vab-Portfolio.git",
      "! [remote rejected] main -> main (pre-receive hook declined)",
      "error: failed to push some refs to 'github.com:babfave000/Vab-Portfolio.git'",
    ],
  },
  {
    name: "GH001, old order",
    kind: "file_too_large",
    facts: ["X is 201.35 MB"],
    lines: [
      "remote: error: GH001: Large files detected.",
      "remote: error: Trace: ea51ee20c6cc0ca49b68cefe17ca2c2f",
      "remote: error: See http://git.io/iEPt8g for more information.",
      "remote: error: File X is 201.35 MB; this exceeds GitHub's file size limit of 100.00 MB",
    ],
  },
  // Repository rules (GH013), secret scanning, email privacy (GH007).
  {
    name: "GH013 rulesets",
    kind: "repository_rules",
    facts: ["main", "Cannot force-push to this branch", "Changes must be made through a pull request"],
    lines: [
      "remote: error: GH013: Repository rule violations found for refs/heads/main.",
      "remote: Review all repository rules at https://github.com/JRedrupp/bison/rules?ref=refs%2Fheads%2Fmain",
      "remote: ",
      "remote: - Cannot force-push to this branch",
      "remote: ",
      "remote: - Changes must be made through a pull request.",
      "remote: ",
      "To https://github.com/JRedrupp/bison",
      " ! [remote rejected] HEAD -> main (push declined due to repository rule violations)",
      "error: failed to push some refs to 'https://github.com/JRedrupp/bison'",
    ],
  },
  {
    name: "GH013 secret scanning",
    kind: "repository_rules",
    facts: ["push protection", "DeepSeek API Key at .env:6", "main"],
    lines: [
      "remote: error: GH013: Repository rule violations found for refs/heads/main.",
      "remote:",
      "remote: - GITHUB PUSH PROTECTION",
      "remote:   —————————————————————————————————————————",
      "remote:     Resolve the following violations before pushing again",
      "remote:",
      "remote:     - Push cannot contain secrets",
      "remote:",
      "remote:",
      "remote:      (?) Learn how to resolve a blocked push",
      "remote:      https://docs.github.com/code-security/secret-scanning/working-with-secret-scanning-and-push-protection/working-with-push-protection-from-the-command-line#resolving-a-blocked-push",
      "remote:",
      "remote:",
      "remote:       —— DeepSeek API Key ——————————————————————————————————",
      "remote:        locations:",
      "remote:          - commit: b6ba2be62ff7d6c34065648997f6f53b44ab2092",
      "remote:            path: .env:6",
      "remote:",
      "remote:        (?) To push, remove secret from commit(s) or follow this URL to allow the secret.",
    ],
  },
  {
    name: "GH013, porcelain status line",
    kind: "repository_rules",
    facts: ["main"],
    lines: ["! refs/heads/main:refs/heads/main [remote rejected] (push declined due to repository rule violations)"],
  },
  {
    name: "GH007 email privacy",
    kind: "repository_rules",
    facts: ["private email address", "codespace-fantastic-space-zebra-vp7p7jpxw69hp9v4"],
    lines: [
      "remote: error: GH007: Your push would publish a private email address.",
      "remote: You can make your email public or disable this protection by visiting:",
      "remote: https://github.com/settings/emails",
      "To https://github.com/AlexandreMeslin/ENG4021",
      " ! [remote rejected] codespace-fantastic-space-zebra-vp7p7jpxw69hp9v4 -> " +
        "codespace-fantastic-space-zebra-vp7p7jpxw69hp9v4 (push declined due to email privacy restrictions)",
      "error: failed to push some refs to 'https://github.com/AlexandreMeslin/ENG4021'",
    ],
  },
  // Archived and not found (auth-stage 403/404, or SSH).
  {
    name: "archived",
    kind: "archived",
    facts: ["DraconDev/dracon-ai-lib is archived"],
    lines: [
      "remote: This repository was archived so it is read-only.",
      "fatal: unable to access 'https://github.com/DraconDev/dracon-ai-lib.git/': The requested URL returned error: 403",
    ],
  },
  {
    name: "archived, SSH",
    kind: "archived",
    facts: ["archived"],
    lines: ["ERROR: This repository was archived so it is read-only.", "fatal: Could not read from remote repository."],
  },
  {
    name: "not found",
    kind: "not_found",
    facts: ["singaravellu/learning"],
    lines: [
      "remote: Repository not found.",
      "fatal: repository 'https://github.com/singaravellu/learning.git/' not found",
    ],
  },
  {
    name: "not found, SSH",
    kind: "not_found",
    facts: ["could not find"],
    lines: [
      "ERROR: Repository not found.",
      "fatal: Could not read from remote repository.",
      "",
      "Please make sure you have the correct access rights",
      "and the repository exists.",
    ],
  },
  // Network and transport.
  {
    name: "DNS",
    kind: "network",
    facts: ["Could not resolve host: github.com"],
    lines: [
      "fatal: unable to access 'https://github.com/HamadDeveloper/my-first-repo.git/': Could not resolve host: github.com",
    ],
  },
  {
    name: "connect timeout, old curl",
    kind: "network",
    facts: ["Timed out"],
    lines: [
      "fatal: unable to access 'https://github.com/o/r.git/': Failed to connect to github.com port 443: Timed out",
    ],
  },
  {
    name: "connect, new curl",
    kind: "network",
    facts: ["Couldn't connect to server"],
    lines: [
      "fatal: unable to access 'https://github.com/o/r.git/': Failed to connect to github.com port 443 after 21054 ms: Couldn't connect to server",
    ],
  },
  {
    name: "TLS reset",
    kind: "network",
    facts: ["Connection was reset"],
    lines: [
      "fatal: unable to access 'https://github.com/o/r.git/': OpenSSL SSL_read: Connection was reset, errno 10054",
    ],
  },
  {
    name: "no route",
    kind: "network",
    facts: ["No route to host"],
    lines: [
      "fatal: unable to access 'https://github.com/o/r.git/': Failed connect to github.com:443; No route to host",
    ],
  },
  {
    name: "reset during upload",
    kind: "network",
    facts: ["curl 55"],
    lines: [
      "error: RPC failed; curl 55 Recv failure: Connection was reset",
      "send-pack: unexpected disconnect while reading sideband packet",
      "fatal: the remote end hung up unexpectedly",
      "Everything up-to-date",
    ],
  },
  {
    name: "HTTP/2 cancel",
    kind: "network",
    facts: ["curl 92"],
    lines: [
      "error: RPC failed; curl 92 HTTP/2 stream 0 was not closed cleanly: CANCEL (err 8)",
      "fatal: the remote end hung up unexpectedly",
    ],
  },
  {
    name: "500 on upload",
    kind: "network",
    facts: ["HTTP 500"],
    lines: [
      "error: RPC failed; HTTP 500 curl 22 The requested URL returned error: 500",
      "send-pack: unexpected disconnect while reading sideband packet",
      "fatal: the remote end hung up unexpectedly",
      "Everything up-to-date",
    ],
  },
  {
    name: "old git 502",
    kind: "network",
    facts: ["HTTP code = 502"],
    lines: [
      "error: RPC failed; result=22, HTTP code = 502",
      "fatal: The remote end hung up unexpectedly",
      "fatal: The remote end hung up unexpectedly",
    ],
  },
  {
    name: "503 on info/refs",
    kind: "network",
    facts: ["503"],
    lines: ["fatal: unable to access 'https://github.com/o/r.git/': The requested URL returned error: 503"],
  },
  // Anything else: the summary carries the last meaningful line.
  {
    name: "stock hook reason",
    kind: "unknown",
    facts: ["hook declined", "hook declined to update refs/heads/main"],
    lines: [
      "remote: error: hook declined to update refs/heads/main",
      "To ../srv.git",
      " ! [remote rejected] main -> main (hook declined)",
      "error: failed to push some refs to '../srv.git'",
    ],
  },
  {
    name: "unknown, last meaningful line",
    kind: "unknown",
    facts: ["error: src refspec nope does not match any"],
    lines: [
      "error: src refspec nope does not match any",
      "error: failed to push some refs to 'https://github.com/o/r.git'",
    ],
  },
];

/** git pads each non-empty `remote:` line with 8 spaces, or ESC[K when stderr is a terminal. */
function withPadding(lines: readonly string[], pad: string): string {
  return lines.map((line) => (/^remote: ?\S/.test(line) ? `${line}${pad}` : line)).join("\n");
}

const PADDINGS = [
  ["no padding", ""],
  ["8-space padding", " ".repeat(8)],
  ["ESC[K padding", "\u001b[K"],
] as const;

describe("classifyPushError on outputs pasted from GitHub", () => {
  describe.each(PADDINGS)("%s", (_label, pad) => {
    test.each(PASTED.map((pasted) => [pasted.name, pasted] as const))("%s", (_name, pasted) => {
      const result = classifyPushError(withPadding(pasted.lines, pad));
      expect(result.kind).toBe(pasted.kind);
      for (const fact of pasted.facts) expect(result.summary).toContain(fact);
      expect(result.remedy).not.toBe("");
      expect(result.summary).not.toMatch(/\s{2}/);
      expect(result.summary).not.toContain("\u001b");
    });
  });

  test("CRLF line endings and \\r progress lines are tolerated", () => {
    const output =
      "Writing objects:  50% (1/2)\rWriting objects: 100% (2/2), done.\r\n" +
      "remote: error: GH006: Protected branch update failed for refs/heads/main.        \r\n" +
      " ! [remote rejected] main -> main (protected branch hook declined)\r\n";
    expect(classifyPushError(output)).toMatchObject({
      kind: "protected_branch",
      summary: expect.stringContaining("main is a protected branch") as unknown,
    });
  });

  test("remedies follow the cause", () => {
    expect(classifyPushError(withPadding(PASTED.find((p) => p.name === "fetch first")!.lines, "")).remedy).toContain(
      "re-run /harness",
    );
    expect(classifyPushError(withPadding(PASTED.find((p) => p.name === "DNS")!.lines, "")).remedy).toContain(
      "Could not reach GitHub",
    );
    expect(
      classifyPushError(withPadding(PASTED.find((p) => p.name === "auth, current wording")!.lines, "")).remedy,
    ).toContain("GITHUB_TOKEN");
    expect(
      classifyPushError(withPadding(PASTED.find((p) => p.name === "permission, GitHub App")!.lines, "")).remedy,
    ).toContain("Contents: write");
  });

  test("no output at all", () => {
    expect(classifyPushError("")).toEqual({
      kind: "unknown",
      summary: "git push failed without an error message",
      remedy: expect.any(String) as unknown,
    });
  });
});

describe("classifyPushError never repeats a token", () => {
  // A token GitHub would never echo, but a misconfigured remote, proxy or hook might.
  const opaque = "s3cr3t-opaque-value-42";
  test.each(PASTED.map((pasted) => [pasted.name, pasted] as const))("%s", (_name, pasted) => {
    const lines = pasted.lines.map(
      (line) =>
        `${line.replaceAll("https://github.com", `https://x-access-token:${opaque}@github.com`)} ${TOKEN} ${opaque}`,
    );
    const result = classifyPushError(lines.join("\n"), [opaque]);
    for (const secret of [TOKEN, opaque]) {
      expect(result.summary).not.toContain(secret);
      expect(result.remedy).not.toContain(secret);
    }
  });

  test("in the fact a summary quotes (the denied identity and the fallback line)", () => {
    const denied = classifyPushError(
      `remote: Permission to acme/widgets.git denied to ${TOKEN}.\nfatal: unable to access 'https://github.com/acme/widgets.git/': The requested URL returned error: 403`,
    );
    expect(denied.kind).toBe("permission");
    expect(denied.summary).not.toContain(TOKEN);
    expect(denied.summary).toContain("[REDACTED]");
    const fallback = classifyPushError(`error: could not push with ${opaque}`, [opaque]);
    expect(fallback.summary).toBe("git push failed: error: could not push with [REDACTED]");
  });
});

describe("workflowPermissionError", () => {
  test("names the workflow file and asks for the Workflows permission", () => {
    const error = workflowPermissionError([".github/workflows/ci.yml"]);
    expect(error.kind).toBe("workflows");
    expect(error.summary).toContain(".github/workflows/ci.yml");
    expect(error.remedy).toBe(
      "Grant the app the Workflows: write permission, or ask for a change that does not touch .github/workflows/",
    );
  });

  test("lists a few files and counts the rest", () => {
    const files = ["a", "b", "c", "d", "e"].map((name) => `.github/workflows/${name}.yml`);
    const error = workflowPermissionError(files);
    expect(error.summary).toContain(
      ".github/workflows/a.yml, .github/workflows/b.yml, .github/workflows/c.yml and 2 more",
    );
  });
});
