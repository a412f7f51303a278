import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Octokit } from "@octokit/core";
import { createNodeMiddleware, createProbot, type ApplicationFunction } from "probot";
import { afterEach, describe, expect, test } from "vitest";
import { scratchDir } from "../../helpers/git.js";
import { appJwt } from "./app-jwt.js";
import { faults, startFakeGitHub, type FakeApp, type FakeGitHub, type RepoInfo } from "./server.js";
import { issueCommentCreated, issuesLabeled, sendWebhook } from "./webhooks.js";
import { fakeToken } from "../../helpers/fake-secrets.js";

/*
 * Proves the fake GitHub with the real clients the app uses: @octokit/core, Probot's own
 * Octokit (app auth through GHE_HOST), the config plugin, Probot's webhook middleware, and the
 * git CLI over smart HTTP.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const HARNESS_YML = "command: /harness\npermission: write\n";
const FULL = { issues: "write", pull_requests: "write", contents: "write", metadata: "read" } as const;

interface World {
  fake: FakeGitHub;
  app: FakeApp & { privateKeyPem: string };
  repo: RepoInfo;
  installationId: number;
}

/** One RSA key for the whole file: generating a 2048-bit key per test would dominate the run time. */
const APP_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
  .privateKey.export({ type: "pkcs8", format: "pem" })
  .toString();

async function world(options: { rateLimit?: number } = {}): Promise<World> {
  const fake = await startFakeGitHub(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit });
  cleanups.push(() => fake.close());
  const app = fake.addApp({ id: 4242, slug: "harness", botUserId: 99001, privateKeyPem: APP_KEY });
  if (app.privateKeyPem === undefined) throw new Error("the fake should hand the key back");
  const repo = await fake.addRepo({
    owner: "acme",
    name: "widgets",
    files: { "README.md": "# widgets\n", ".github/harness.yml": HARNESS_YML },
  });
  const installation = fake.addInstallation({ id: 77, account: "acme", permissions: { ...FULL } });
  return { fake, app: { ...app, privateKeyPem: app.privateKeyPem }, repo, installationId: installation.id };
}

function jwtClient(w: World): Octokit {
  return new Octokit({ baseUrl: w.fake.apiUrl, auth: appJwt(w.app.privateKeyPem, w.app.id) });
}

function tokenClient(w: World, token: string): Octokit {
  return new Octokit({ baseUrl: w.fake.apiUrl, auth: token });
}

/** Status and data of a request that may fail, so tests can assert on GitHub's error bodies. */
async function attempt(
  run: () => Promise<{ status: number; data: unknown; headers: Record<string, unknown> }>,
): Promise<{ status: number; data: unknown; headers: Record<string, unknown> }> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof Error && "status" in error && "response" in error) {
      const response = error.response as
        { status: number; data: unknown; headers: Record<string, unknown> } | undefined;
      if (response) return response;
    }
    throw error;
  }
}

async function mintViaApi(
  w: World,
  body: Record<string, unknown> = {},
): Promise<{ token: string; data: Record<string, unknown> }> {
  const response = await jwtClient(w).request("POST /app/installations/{installation_id}/access_tokens", {
    installation_id: w.installationId,
    ...body,
  });
  return { token: response.data.token, data: response.data as unknown as Record<string, unknown> };
}

/** Runs the git CLI asynchronously (the fake lives in this process, so a synchronous call would deadlock). */
function gitCli(cwd: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", args, {
      cwd,
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: cwd,
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CONFIG_GLOBAL: "/dev/null",
        GIT_TERMINAL_PROMPT: "0",
        GIT_AUTHOR_NAME: "harness[bot]",
        GIT_AUTHOR_EMAIL: "99001+harness[bot]@users.noreply.github.com",
        GIT_COMMITTER_NAME: "harness[bot]",
        GIT_COMMITTER_EMAIL: "99001+harness[bot]@users.noreply.github.com",
        LC_ALL: "C",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      resolve({ code, output });
    });
  });
}

function authedUrl(repo: RepoInfo, token: string): string {
  const url = new URL(repo.cloneUrl);
  url.username = "x-access-token";
  url.password = token;
  return url.toString();
}

async function cloneWith(w: World, token: string): Promise<{ dir: string; code: number | null; output: string }> {
  const scratch = await scratchDir("fake-github-clone-");
  cleanups.push(scratch.cleanup);
  const dir = join(scratch.path, "clone");
  const result = await gitCli(scratch.path, ["clone", "--quiet", authedUrl(w.repo, token), dir]);
  return { dir, ...result };
}

async function commitFile(dir: string, path: string, content: string): Promise<void> {
  await mkdir(join(dir, path, ".."), { recursive: true });
  await writeFile(join(dir, path), content);
  expect((await gitCli(dir, ["add", "--", path])).code).toBe(0);
  expect((await gitCli(dir, ["commit", "--quiet", "-m", `change ${path}`])).code).toBe(0);
}

describe("fake GitHub: app authentication and tokens", () => {
  test("an app JWT reaches /app and mints an installation token that reaches the repository", async () => {
    const w = await world();
    const jwt = jwtClient(w);

    const app = await jwt.request("GET /app");
    expect(app.data).toMatchObject({ id: 4242, slug: "harness" });
    const viaRepo = await jwt.request("GET /repos/{owner}/{repo}/installation", { owner: "acme", repo: "widgets" });
    expect(viaRepo.data.id).toBe(w.installationId);

    const before = Date.now();
    const { token, data } = await mintViaApi(w);
    expect(token).toMatch(/^ghs_[A-Za-z0-9]{36}$/);
    const expiresIn = Date.parse(String(data["expires_at"])) - before;
    expect(expiresIn).toBeGreaterThan(59 * 60 * 1000);
    expect(expiresIn).toBeLessThanOrEqual(60 * 60 * 1000 + 1000);
    expect(data["permissions"]).toEqual(FULL);
    expect(data["repository_selection"]).toBe("all");

    const repo = await tokenClient(w, token).request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" });
    expect(repo.data).toMatchObject({
      id: w.repo.id,
      full_name: "acme/widgets",
      default_branch: "main",
      private: true,
      clone_url: `${w.fake.url}/acme/widgets.git`,
      html_url: `${w.fake.url}/acme/widgets`,
    });
    expect(repo.headers["x-ratelimit-remaining"]).toBeDefined();

    const bot = await tokenClient(w, token).request("GET /users/{username}", { username: "harness[bot]" });
    expect(bot.data).toMatchObject({ login: "harness[bot]", id: 99001, type: "Bot" });
  });

  test("only credentials the fake issued are accepted", async () => {
    const w = await world();
    // A second app, with a key pair the fake generates: its key signs only for itself.
    const other = w.fake.addApp({ id: 5150, slug: "other" });
    const stranger = other.privateKeyPem!;
    const otherApp = await new Octokit({ baseUrl: w.fake.apiUrl, auth: appJwt(stranger, other.id) }).request(
      "GET /app",
    );
    expect(otherApp.data).toMatchObject({ id: 5150, slug: "other" });
    const forged = await attempt(() =>
      new Octokit({ baseUrl: w.fake.apiUrl, auth: appJwt(stranger, w.app.id) }).request("GET /app"),
    );
    expect(forged.status).toBe(401);
    expect(forged.data).toMatchObject({ message: "A JSON web token could not be decoded" });

    const old = Math.floor(Date.now() / 1000) - 3600;
    const expired = await attempt(() =>
      new Octokit({
        baseUrl: w.fake.apiUrl,
        auth: appJwt(w.app.privateKeyPem, w.app.id, { iat: old, exp: old + 600 }),
      }).request("GET /app"),
    );
    expect(expired.status).toBe(401);
    expect((expired.data as { message: string }).message).toMatch(/'Expiration time' claim \('exp'\)/);

    const made = await attempt(() =>
      tokenClient(w, fakeToken("ghs_")).request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" }),
    );
    expect(made).toMatchObject({ status: 401, data: { message: "Bad credentials" } });

    const { token } = await mintViaApi(w);
    const tokenOnApp = await attempt(() => tokenClient(w, token).request("GET /app"));
    expect(tokenOnApp.status).toBe(401);
  });

  test(
    "tokens are down-scoped to the repositories and permissions asked, " + "and never beyond the installation",
    async () => {
      const w = await world();
      const other = await w.fake.addRepo({ owner: "acme", name: "gadgets" });
      const elsewhere = await w.fake.addRepo({ owner: "umbrella", name: "secret" });

      const { token, data } = await mintViaApi(w, { repository_ids: [w.repo.id], permissions: { contents: "read" } });
      expect(data["permissions"]).toEqual({ contents: "read", metadata: "read" });
      expect(data["repository_selection"]).toBe("selected");
      expect((data["repositories"] as { full_name: string }[]).map((r) => r.full_name)).toEqual(["acme/widgets"]);
      const minted = w.fake.mintedTokens().find((t) => t.token === token);
      expect(minted).toMatchObject({
        repositories: ["acme/widgets"],
        permissions: { contents: "read", metadata: "read" },
        revoked: false,
      });

      const client = tokenClient(w, token);
      expect(
        (await attempt(() => client.request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "gadgets" }))).status,
      ).toBe(404);
      expect((await client.request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" })).status).toBe(200);

      const byName = await mintViaApi(w, { repositories: ["gadgets"] });
      expect((byName.data["repositories"] as { id: number }[]).map((r) => r.id)).toEqual([other.id]);

      const wider = await attempt(() =>
        jwtClient(w).request("POST /app/installations/{installation_id}/access_tokens", {
          installation_id: w.installationId,
          permissions: { workflows: "write" },
        }),
      );
      expect(wider).toMatchObject({
        status: 422,
        data: { message: "The permissions requested are not granted to this installation." },
      });
      const foreign = await attempt(() =>
        jwtClient(w).request("POST /app/installations/{installation_id}/access_tokens", {
          installation_id: w.installationId,
          repository_ids: [elsewhere.id],
        }),
      );
      expect(foreign.status).toBe(422);
      const noSuchInstallation = await attempt(() =>
        jwtClient(w).request("POST /app/installations/{installation_id}/access_tokens", { installation_id: 999 }),
      );
      expect(noSuchInstallation.status).toBe(404);
    },
  );

  test("a revoked or expired token gets 401 Bad credentials", async () => {
    const w = await world();
    const { token } = await mintViaApi(w);
    const client = tokenClient(w, token);
    expect((await client.request("DELETE /installation/token")).status).toBe(204);
    const after = await attempt(() => client.request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" }));
    expect(after).toMatchObject({ status: 401, data: { message: "Bad credentials" } });
    expect(w.fake.mintedTokens().find((t) => t.token === token)?.revoked).toBe(true);

    const second = w.fake.mintToken(w.installationId);
    w.fake.advanceClock(61 * 60 * 1000);
    expect(
      (
        await attempt(() =>
          tokenClient(w, second).request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" }),
        )
      ).status,
    ).toBe(401);
    expect(w.fake.mintedTokens().find((t) => t.token === second)?.expired).toBe(true);
    w.fake.advanceClock(-61 * 60 * 1000);

    // Uninstalling ends every token of the installation and hides it from the repository.
    const third = w.fake.mintToken(w.installationId);
    w.fake.removeInstallation(w.installationId);
    expect(
      (
        await attempt(() =>
          tokenClient(w, third).request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" }),
        )
      ).status,
    ).toBe(401);
    expect(
      (
        await attempt(() =>
          jwtClient(w).request("GET /repos/{owner}/{repo}/installation", { owner: "acme", repo: "widgets" }),
        )
      ).status,
    ).toBe(404);
  });
});

describe("fake GitHub: issues, comments, reactions, permissions", () => {
  test("a read-only token may read an issue but not comment on it", async () => {
    const w = await world();
    const issue = w.fake.createIssue("acme", "widgets", { title: "Fix the flux", body: "It leaks.", user: "alice" });
    const token = w.fake.mintToken(w.installationId, { permissions: { issues: "read" } });
    const client = tokenClient(w, token);
    const read = await client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
      owner: "acme",
      repo: "widgets",
      issue_number: issue.number,
    });
    expect(read.data).toMatchObject({
      number: 1,
      title: "Fix the flux",
      user: { login: "alice" },
      html_url: `${w.fake.url}/acme/widgets/issues/1`,
    });
    expect("pull_request" in read.data).toBe(false);

    const denied = await attempt(() =>
      client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body: "hi",
      }),
    );
    expect(denied).toMatchObject({ status: 403, data: { message: "Resource not accessible by integration" } });
    expect(w.fake.issueComments("acme", "widgets", 1)).toEqual([]);

    const noIssues = tokenClient(w, w.fake.mintToken(w.installationId, { permissions: { contents: "read" } }));
    expect(
      (
        await attempt(() =>
          noIssues.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
            owner: "acme",
            repo: "widgets",
            issue_number: 1,
          }),
        )
      ).status,
    ).toBe(403);
  });

  test("issues: 404 when missing, 410 when deleted", async () => {
    const w = await world();
    w.fake.createIssue("acme", "widgets", { title: "gone soon" });
    w.fake.deleteIssue("acme", "widgets", 1);
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    expect(
      (
        await attempt(() =>
          client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
            owner: "acme",
            repo: "widgets",
            issue_number: 1,
          }),
        )
      ).status,
    ).toBe(410);
    expect(
      (
        await attempt(() =>
          client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
            owner: "acme",
            repo: "widgets",
            issue_number: 2,
          }),
        )
      ).status,
    ).toBe(404);
  });

  test("collaborator permission reports GitHub's legacy permission and the real role", async () => {
    const w = await world();
    w.fake.setCollaborator("acme", "widgets", "alice", "maintain");
    w.fake.setCollaborator("acme", "widgets", "bob", "triage");
    const client = tokenClient(w, w.fake.mintToken(w.installationId, { permissions: { metadata: "read" } }));
    const level = async (
      owner: string,
      repo: string,
      username: string,
    ): Promise<{ permission: string; role_name: string }> =>
      (await client.request("GET /repos/{owner}/{repo}/collaborators/{username}/permission", { owner, repo, username }))
        .data;
    expect(await level("acme", "widgets", "alice")).toMatchObject({ permission: "write", role_name: "maintain" });
    expect(await level("acme", "widgets", "bob")).toMatchObject({ permission: "read", role_name: "triage" });
    expect(await level("acme", "widgets", "acme")).toMatchObject({ permission: "admin" });
    // Someone who is not a collaborator is a 404, on a private repository and a public one alike.
    const stranger = (repo: string) =>
      attempt(() =>
        client.request("GET /repos/{owner}/{repo}/collaborators/{username}/permission", {
          owner: "acme",
          repo,
          username: "mallory",
        }),
      );
    expect(await stranger("widgets")).toMatchObject({ status: 404, data: { message: "Not Found" } });
    await w.fake.addRepo({ owner: "acme", name: "open", private: false });
    expect(await stranger("open")).toMatchObject({ status: 404 });
  });

  test("comments: created as the app's bot, updated, listed page by page with a Link header", async () => {
    const w = await world();
    w.fake.createIssue("acme", "widgets", { title: "t" });
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    const ids: number[] = [];
    for (const body of ["one", "two", "three"]) {
      const created = await client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body,
      });
      expect(created.status).toBe(201);
      ids.push(Number(created.data.id));
    }
    const first = await client.request("GET /repos/{owner}/{repo}/issues/comments/{comment_id}", {
      owner: "acme",
      repo: "widgets",
      comment_id: ids[0]!,
    });
    expect(first.data).toMatchObject({
      body: "one",
      user: { login: "harness[bot]", id: 99001, type: "Bot" },
      html_url: `${w.fake.url}/acme/widgets/issues/1#issuecomment-${String(ids[0])}`,
      performed_via_github_app: { slug: "harness" },
    });

    const updated = await client.request("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", {
      owner: "acme",
      repo: "widgets",
      comment_id: ids[0]!,
      body: "one, edited",
    });
    expect(updated.data.body).toBe("one, edited");
    expect(w.fake.issueComments("acme", "widgets", 1).map((c) => c.body)).toEqual(["one, edited", "two", "three"]);

    const page1 = await client.request("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", {
      owner: "acme",
      repo: "widgets",
      issue_number: 1,
      per_page: 2,
    });
    expect(page1.data.map((c) => c.body)).toEqual(["one, edited", "two"]);
    const next = /<([^>]+)>; rel="next"/.exec(String(page1.headers.link))?.[1];
    expect(next).toBeDefined();
    const page2 = await client.request(`GET ${next!}`);
    expect((page2.data as { body: string }[]).map((c) => c.body)).toEqual(["three"]);

    const tooLong = await attempt(() =>
      client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body: "x".repeat(65_537),
      }),
    );
    expect(tooLong).toMatchObject({ status: 422, data: { message: "Validation Failed" } });
  });

  test("reactions: 201 the first time, 200 with the same reaction on a repeat", async () => {
    const w = await world();
    w.fake.createIssue("acme", "widgets", { title: "t" });
    const trigger = w.fake.addComment("acme", "widgets", 1, { body: "/harness fix it", user: "alice" });
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    const react = () =>
      client.request("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", {
        owner: "acme",
        repo: "widgets",
        comment_id: trigger.id,
        content: "eyes",
      });
    const first = await react();
    const again = await react();
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.data.id).toBe(first.data.id);
    expect(first.data.user?.login).toBe("harness[bot]");
    const onIssue = await client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/reactions", {
      owner: "acme",
      repo: "widgets",
      issue_number: 1,
      content: "rocket",
    });
    expect(onIssue.status).toBe(201);
    expect(w.fake.reactions("acme", "widgets", { commentId: trigger.id }).map((r) => r.content)).toEqual(["eyes"]);
    expect(w.fake.reactions("acme", "widgets", { issueNumber: 1 }).map((r) => r.content)).toEqual(["rocket"]);
    const bogus = await attempt(() =>
      client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/reactions", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        content: "party" as "eyes",
      }),
    );
    expect(bogus.status).toBe(422);
    expect(w.fake.takeViolations()).toEqual([
      expect.stringMatching(
        /^POST \/repos\/\{owner\}\/\{repo\}\/issues\/\{issue_number\}\/reactions: request .*body\/content/,
      ),
      expect.stringMatching(/ghes-3\.17's description: body\/content must be equal to one of the allowed values/),
    ]);
  });
});

describe("fake GitHub: pull requests and contents", () => {
  test("pull requests: created from a pushed branch, listed by head, refused when duplicate or empty", async () => {
    const w = await world();
    const head = await w.fake.setFile("acme", "widgets", "src/flux.ts", "export const flux = 1;\n", {
      branch: "harness/issue-1",
    });
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    const create = (body: Record<string, unknown>) =>
      client.request("POST /repos/{owner}/{repo}/pulls", {
        owner: "acme",
        repo: "widgets",
        title: "Fix the flux",
        ...body,
      } as { owner: string; repo: string; title: string; head: string; base: string });

    const created = await create({ head: "harness/issue-1", base: "main", body: "Fixes #1", draft: true });
    expect(created.status).toBe(201);
    expect(created.data).toMatchObject({
      number: 1,
      draft: true,
      html_url: `${w.fake.url}/acme/widgets/pull/1`,
      head: { ref: "harness/issue-1", sha: head, repo: { full_name: "acme/widgets" } },
      base: { ref: "main" },
      user: { login: "harness[bot]" },
    });

    const listed = await client.request("GET /repos/{owner}/{repo}/pulls", {
      owner: "acme",
      repo: "widgets",
      head: "acme:harness/issue-1",
      state: "open",
    });
    expect(listed.data.map((p) => p.number)).toEqual([1]);
    const none = await client.request("GET /repos/{owner}/{repo}/pulls", {
      owner: "acme",
      repo: "widgets",
      head: "acme:other",
      state: "open",
    });
    expect(none.data).toEqual([]);

    const duplicate = await attempt(() => create({ head: "acme:harness/issue-1", base: "main" }));
    expect(duplicate).toMatchObject({
      status: 422,
      data: {
        message: "Validation Failed",
        errors: [{ message: "A pull request already exists for acme:harness/issue-1." }],
      },
    });
    expect((await attempt(() => create({ head: "main", base: "main" }))).status).toBe(422);
    expect((await attempt(() => create({ head: "no-such-branch", base: "main" }))).status).toBe(422);

    const asIssue = await client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
      owner: "acme",
      repo: "widgets",
      issue_number: 1,
    });
    expect(asIssue.data.pull_request?.html_url).toBe(`${w.fake.url}/acme/widgets/pull/1`);

    w.fake.setCollaborator("acme", "widgets", "alice", "write");
    const labels = await client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/labels", {
      owner: "acme",
      repo: "widgets",
      issue_number: 1,
      labels: ["harness"],
    });
    expect(labels.data.map((l) => l.name)).toEqual(["harness"]);
    const reviewers = await client.request("POST /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", {
      owner: "acme",
      repo: "widgets",
      pull_number: 1,
      reviewers: ["alice"],
    });
    expect(reviewers.data.requested_reviewers?.map((u) => u.login)).toEqual(["alice"]);
    expect(
      (
        await attempt(() =>
          client.request("POST /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", {
            owner: "acme",
            repo: "widgets",
            pull_number: 1,
            reviewers: ["stranger"],
          }),
        )
      ).status,
    ).toBe(422);

    const patched = await client.request("PATCH /repos/{owner}/{repo}/pulls/{pull_number}", {
      owner: "acme",
      repo: "widgets",
      pull_number: 1,
      body: "Fixes #1 (updated)",
    });
    expect(patched.data.body).toBe("Fixes #1 (updated)");

    const fromFork = await w.fake.addPullRequest("acme", "widgets", {
      title: "From a fork",
      head: "patch-1",
      fork: { owner: "mallory" },
      headSha: head,
    });
    const fork = await client.request("GET /repos/{owner}/{repo}/pulls/{pull_number}", {
      owner: "acme",
      repo: "widgets",
      pull_number: fromFork.number,
    });
    expect(fork.data.head).toMatchObject({
      ref: "patch-1",
      label: "mallory:patch-1",
      repo: { full_name: "mallory/widgets", fork: true },
    });

    const readOnly = tokenClient(w, w.fake.mintToken(w.installationId, { permissions: { pull_requests: "read" } }));
    expect(
      (
        await attempt(() =>
          readOnly.request("POST /repos/{owner}/{repo}/pulls", {
            owner: "acme",
            repo: "widgets",
            title: "x",
            head: "harness/issue-1",
            base: "main",
          }),
        )
      ).status,
    ).toBe(403);
  });

  test(
    "contents: .github/harness.yml as base64 JSON and raw, " + "from the default branch or a ref; 404 when missing",
    async () => {
      const w = await world();
      const client = tokenClient(w, w.fake.mintToken(w.installationId, { permissions: { contents: "read" } }));
      const json = await client.request("GET /repos/{owner}/{repo}/contents/{path}", {
        owner: "acme",
        repo: "widgets",
        path: ".github/harness.yml",
      });
      const file = json.data as { type: string; encoding: string; content: string; sha: string; path: string };
      expect(file).toMatchObject({ type: "file", encoding: "base64", path: ".github/harness.yml" });
      expect(Buffer.from(file.content, "base64").toString("utf8")).toBe(HARNESS_YML);
      expect(file.sha).toMatch(/^[0-9a-f]{40}$/);

      const raw = await client.request("GET /repos/{owner}/{repo}/contents/{path}", {
        owner: "acme",
        repo: "widgets",
        path: ".github/harness.yml",
        mediaType: { format: "raw" },
      });
      expect(raw.data).toBe(HARNESS_YML);

      await w.fake.setFile("acme", "widgets", ".github/harness.yml", "command: /bot\n", { branch: "experiment" });
      const onBranch = await client.request("GET /repos/{owner}/{repo}/contents/{path}", {
        owner: "acme",
        repo: "widgets",
        path: ".github/harness.yml",
        ref: "experiment",
        mediaType: { format: "raw" },
      });
      expect(onBranch.data).toBe("command: /bot\n");
      expect(await w.fake.readFile("acme", "widgets", ".github/harness.yml")).toBe(HARNESS_YML);

      await w.fake.setFile("acme", "widgets", ".github/harness.yml", null);
      expect(
        (
          await attempt(() =>
            client.request("GET /repos/{owner}/{repo}/contents/{path}", {
              owner: "acme",
              repo: "widgets",
              path: ".github/harness.yml",
            }),
          )
        ).status,
      ).toBe(404);
    },
  );
});

describe("fake GitHub: git smart HTTP", () => {
  test("a read token clones but cannot push; GitHub's refusal text reaches the client", async () => {
    const w = await world();
    const read = w.fake.mintToken(w.installationId, { permissions: { contents: "read" } });
    const clone = await cloneWith(w, read);
    expect(clone.code).toBe(0);
    expect((await gitCli(clone.dir, ["cat-file", "-p", "HEAD:.github/harness.yml"])).output).toBe(HARNESS_YML);

    await commitFile(clone.dir, "src/a.ts", "export {};\n");
    const push = await gitCli(clone.dir, ["push", "origin", "HEAD:refs/heads/harness/try"]);
    expect(push.code).not.toBe(0);
    expect(push.output).toContain("remote: Permission to acme/widgets.git denied to harness[bot].");
    expect((await w.fake.branches("acme", "widgets")).map((b) => b.name)).toEqual(["main"]);
  });

  test("a contents:write token pushes a branch", async () => {
    const w = await world();
    const clone = await cloneWith(w, w.fake.mintToken(w.installationId, { permissions: { contents: "read" } }));
    await commitFile(clone.dir, "src/a.ts", "export {};\n");
    const write = w.fake.mintToken(w.installationId, { permissions: { contents: "write" } });
    const push = await gitCli(clone.dir, ["push", authedUrl(w.repo, write), "HEAD:refs/heads/harness/issue-1"]);
    expect(push.code, push.output).toBe(0);
    const tip = (await gitCli(clone.dir, ["rev-parse", "HEAD"])).output.trim();
    expect(await w.fake.branches("acme", "widgets")).toContainEqual({ name: "harness/issue-1", sha: tip });
  });

  test("a push touching .github/workflows needs the workflows permission", async () => {
    const w = await world();
    w.fake.state.installations.get(w.installationId)!.permissions["workflows"] = "write";
    const clone = await cloneWith(w, w.fake.mintToken(w.installationId, { permissions: { contents: "read" } }));
    await commitFile(clone.dir, ".github/workflows/ci.yml", "on: push\n");

    const withoutWorkflows = w.fake.mintToken(w.installationId, { permissions: { contents: "write" } });
    const refused = await gitCli(clone.dir, [
      "push",
      authedUrl(w.repo, withoutWorkflows),
      "HEAD:refs/heads/harness/ci",
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.output).toContain(
      "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without " +
        "`workflows` permission",
    );
    expect((await w.fake.branches("acme", "widgets")).map((b) => b.name)).toEqual(["main"]);

    const withWorkflows = w.fake.mintToken(w.installationId, {
      permissions: { contents: "write", workflows: "write" },
    });
    const accepted = await gitCli(clone.dir, ["push", authedUrl(w.repo, withWorkflows), "HEAD:refs/heads/harness/ci"]);
    expect(accepted.code, accepted.output).toBe(0);
    expect((await w.fake.branches("acme", "widgets")).map((b) => b.name)).toContain("harness/ci");
  });

  test("revoked, unknown and missing credentials cannot clone a private repository", async () => {
    const w = await world();
    const token = w.fake.mintToken(w.installationId);
    w.fake.revokeToken(token);
    const revoked = await cloneWith(w, token);
    expect(revoked.code).not.toBe(0);
    expect(revoked.output).toContain(
      "Invalid username or token. Password authentication is not supported for Git operations.",
    );

    const scratch = await scratchDir("fake-github-anon-");
    cleanups.push(scratch.cleanup);
    const anonymous = await gitCli(scratch.path, ["clone", "--quiet", w.repo.cloneUrl, "anon"]);
    expect(anonymous.code).not.toBe(0);

    const elsewhere = await w.fake.addRepo({ owner: "umbrella", name: "secret" });
    const wrongRepo = await gitCli(scratch.path, [
      "clone",
      "--quiet",
      authedUrl(elsewhere, w.fake.mintToken(w.installationId)),
      "wrong",
    ]);
    expect(wrongRepo.code).not.toBe(0);
    expect(wrongRepo.output).toContain("Repository not found.");

    // Public repositories clone anonymously, as on GitHub, but still refuse anonymous pushes.
    const open = await w.fake.addRepo({ owner: "acme", name: "open", private: false });
    const publicClone = await gitCli(scratch.path, ["clone", "--quiet", open.cloneUrl, "open"]);
    expect(publicClone.code, publicClone.output).toBe(0);
    await commitFile(join(scratch.path, "open"), "x.txt", "x\n");
    expect((await gitCli(join(scratch.path, "open"), ["push", "origin", "HEAD:refs/heads/x"])).code).not.toBe(0);

    const gitRequests = w.fake.requests.filter((r) => r.kind === "git");
    expect(gitRequests.length).toBeGreaterThan(0);
    expect(gitRequests.some((r) => r.status === 401)).toBe(true);
  });
});

describe("fake GitHub: faults, rate limits, recording", () => {
  test("an injected 502 answers the matching request once; the next one goes through", async () => {
    const w = await world();
    w.fake.createIssue("acme", "widgets", { title: "t" });
    const handle = w.fake.injectFault(
      { method: "POST", pathPattern: "/repos/{owner}/{repo}/issues/{issue_number}/comments" },
      faults.badGateway(),
    );
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    const post = () =>
      client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body: "status",
      });
    expect((await attempt(post)).status).toBe(502);
    expect((await post()).status).toBe(201);
    expect(handle.hits).toBe(1);
    expect(w.fake.requests.filter((r) => r.fault === true)).toHaveLength(1);
    expect(w.fake.issueComments("acme", "widgets", 1)).toHaveLength(1);
  });

  test("a fault with `every` answers only every n-th matching request, a proxy failing a share of them", async () => {
    const w = await world();
    const handle = w.fake.injectFault({ pathPattern: /^\/api\/v3\//, times: Infinity, every: 3 }, faults.badGateway());
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++)
      statuses.push(
        (await attempt(() => client.request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" }))).status,
      );
    expect(statuses).toEqual([200, 200, 502, 200, 200, 502, 200]);
    expect(handle.hits).toBe(2);
  });

  test("secondary rate limits and an exhausted primary limit look like GitHub's", async () => {
    const w = await world({ rateLimit: 3 });
    w.fake.createIssue("acme", "widgets", { title: "t" });
    w.fake.injectFault({ method: "POST", pathPattern: /\/comments$/, times: 1 }, faults.secondaryRateLimit(7));
    const client = tokenClient(w, w.fake.mintToken(w.installationId));
    const secondary = await attempt(() =>
      client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body: "x",
      }),
    );
    expect(secondary.status).toBe(403);
    expect(secondary.headers["retry-after"]).toBe("7");
    expect((secondary.data as { message: string }).message).toMatch(/secondary rate limit/);

    const get = () => client.request("GET /repos/{owner}/{repo}", { owner: "acme", repo: "widgets" });
    expect((await get()).headers["x-ratelimit-remaining"]).toBe("2");
    await get();
    expect((await get()).headers["x-ratelimit-remaining"]).toBe("0");
    const exhausted = await attempt(get);
    expect(exhausted).toMatchObject({
      status: 403,
      data: { message: `API rate limit exceeded for installation ID ${String(w.installationId)}.` },
    });
    expect(exhausted.headers["x-ratelimit-remaining"]).toBe("0");
    const report = await client.request("GET /rate_limit");
    expect(report.data.resources.core).toMatchObject({ limit: 3, remaining: 0 });
  });

  test(
    "every request is recorded with its authorization header and body; " + "unknown routes are 404 and flagged",
    async () => {
      const w = await world();
      w.fake.createIssue("acme", "widgets", { title: "t" });
      const token = w.fake.mintToken(w.installationId);
      const client = tokenClient(w, token);
      await client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body: "hello",
      });
      const missing = await attempt(() =>
        client.request("GET /repos/{owner}/{repo}/hooks", { owner: "acme", repo: "widgets" }),
      );
      expect(missing).toMatchObject({ status: 404, data: { message: "Not Found" } });

      const comment = w.fake.requests.find(
        (r) => r.route === "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
      );
      expect(comment).toMatchObject({
        method: "POST",
        path: "/api/v3/repos/acme/widgets/issues/1/comments",
        status: 201,
        auth: { kind: "token", installationId: w.installationId },
      });
      expect(comment?.headers.authorization).toBe(`token ${token}`);
      expect(JSON.parse(comment?.body ?? "{}")).toEqual({ body: "hello" });
      expect(w.fake.unhandledRequests().map((r) => `${r.method} ${r.path}`)).toEqual([
        "GET /api/v3/repos/acme/widgets/hooks",
      ]);
      expect(w.fake.takeViolations()).toEqual([
        "GET /repos/acme/widgets/hooks: unknown route (the fake serves no such endpoint)",
      ]);
    },
  );
});

describe("fake GitHub with Probot", () => {
  test(
    "createProbot with GHE_HOST authenticates as the installation, " + "comments and reads config through the fake",
    async () => {
      const w = await world();
      w.fake.createIssue("acme", "widgets", { title: "t" });
      const probot = createProbot({
        env: {
          APP_ID: String(w.app.id),
          PRIVATE_KEY: w.app.privateKeyPem,
          GHE_HOST: w.fake.host,
          GHE_PROTOCOL: "http",
          WEBHOOK_SECRET: "s3cret",
          LOG_LEVEL: "silent",
        },
      });
      const appOctokit = await probot.auth();
      const app = await appOctokit.request("GET /app");
      expect(app.data?.slug).toBe("harness");

      const octokit = await probot.auth(w.installationId);
      const comment = await octokit.rest.issues.createComment({
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        body: "queued",
      });
      expect(comment.data.user?.login).toBe("harness[bot]");
      const config = await octokit.config.get({ owner: "acme", repo: "widgets", path: ".github/harness.yml" });
      expect(config.config).toEqual({ command: "/harness", permission: "write" });

      const scoped = await appOctokit.request("POST /app/installations/{installation_id}/access_tokens", {
        installation_id: w.installationId,
        repository_ids: [w.repo.id],
        permissions: { contents: "write" },
      });
      expect(scoped.data.permissions).toEqual({ contents: "write", metadata: "read" });

      const paths = w.fake.requests.map((r) => `${r.method} ${r.path}`);
      expect(paths).toContain(`POST /api/v3/app/installations/${String(w.installationId)}/access_tokens`);
      expect(paths).toContain("POST /api/v3/repos/acme/widgets/issues/1/comments");
      expect(w.fake.unhandledRequests()).toEqual([]);
    },
  );

  test("signed webhooks built from GitHub's examples reach a Probot app; a wrong secret is refused", async () => {
    const w = await world();
    const issue = w.fake.createIssue("acme", "widgets", {
      title: "Fix the flux",
      body: "It leaks.",
      user: "alice",
      labels: ["bug"],
    });
    const trigger = w.fake.addComment("acme", "widgets", issue.number, { body: "/harness fix it", user: "alice" });
    const seen: { name: string; payload: unknown }[] = [];
    const appFn: ApplicationFunction = (app) => {
      app.on("issue_comment.created", (context) => {
        seen.push({ name: context.name, payload: context.payload });
      });
      app.on("issues.labeled", (context) => {
        seen.push({ name: context.name, payload: context.payload });
      });
    };
    const probot = createProbot({
      env: {
        APP_ID: String(w.app.id),
        PRIVATE_KEY: w.app.privateKeyPem,
        GHE_HOST: w.fake.host,
        GHE_PROTOCOL: "http",
        WEBHOOK_SECRET: "s3cret",
        LOG_LEVEL: "silent",
      },
    });
    const middleware = await createNodeMiddleware(appFn, { probot });
    const server = createServer((req, res) => {
      void middleware(req, res, () => {
        res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) =>
          server.close(() => {
            resolve();
          }),
        ),
    );
    const appUrl = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;

    const payload = issueCommentCreated({ repo: w.repo, issue, comment: trigger, installationId: w.installationId });
    const delivery = await sendWebhook(appUrl, "s3cret", "issue_comment", payload, "delivery-1", { appId: w.app.id });
    expect(delivery.status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.payload).toMatchObject({
      action: "created",
      comment: { id: trigger.id, body: "/harness fix it", user: { login: "alice", type: "User" } },
      issue: {
        number: 1,
        title: "Fix the flux",
        labels: [{ name: "bug" }],
        html_url: `${w.fake.url}/acme/widgets/issues/1`,
      },
      repository: {
        id: w.repo.id,
        full_name: "acme/widgets",
        clone_url: `${w.fake.url}/acme/widgets.git`,
        default_branch: "main",
        private: true,
      },
      sender: { login: "alice" },
      installation: { id: w.installationId },
    });
    expect(JSON.stringify(payload)).not.toContain("github.com/");

    const onPr = issueCommentCreated({
      repo: w.repo,
      issue,
      comment: trigger,
      installationId: w.installationId,
      isPullRequest: true,
    });
    expect(onPr.issue.pull_request?.html_url).toBe(`${w.fake.url}/acme/widgets/pull/1`);

    const labeled = issuesLabeled({
      repo: w.repo,
      issue,
      label: "harness",
      sender: { login: "alice" },
      installationId: w.installationId,
    });
    expect((await sendWebhook(appUrl, "s3cret", "issues", labeled)).status).toBe(200);
    expect(seen[1]?.payload).toMatchObject({
      action: "labeled",
      label: { name: "harness" },
      issue: { labels: [{ name: "bug" }, { name: "harness" }] },
    });

    const forged = await sendWebhook(appUrl, "wrong-secret", "issue_comment", payload);
    expect(forged.status).toBe(400);
    expect(seen).toHaveLength(2);
  });
});
