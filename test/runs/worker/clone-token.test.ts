import { describe, expect, test } from "vitest";
import type { MintedToken } from "../../../src/github/tokens.js";
import { withCloneToken } from "../../../src/runs/worker/clone-token.js";
import type { RunContext } from "../../../src/runs/worker/run-context.js";

// The clone's read-only token is revoked once the sandbox is ready — but not while the warm
// cache's mirror is still catching up with it, or that fetch fails and the mirror stays behind.

function world(refreshed?: (scope: string, repositoryId: string) => Promise<void>) {
  const revoked: string[] = [];
  const asked: Array<[string, string]> = [];
  const minted: MintedToken = {
    token: "ghs_clone",
    expiresAt: "2099-01-01T00:00:00Z",
    permissions: { contents: "read" },
  };
  const tokens = {
    mint: () => Promise.resolve(minted),
    revoke: (token: string) => {
      revoked.push(token);
      return Promise.resolve();
    },
  };
  const run = {
    request: { installationId: 77, repo: { id: 4242 } },
    deps: {
      tokens,
      ...(refreshed
        ? {
            repoCache: {
              lease: () => Promise.resolve(undefined),
              refreshed: (scope: string, repositoryId: string) => {
                asked.push([scope, repositoryId]);
                return refreshed(scope, repositoryId);
              },
            },
          }
        : {}),
    },
    tokens,
    log: { warn: () => undefined },
  } as unknown as RunContext;
  return { run, revoked, asked };
}

const onHost = { mirrorOnHost: true };
const ready = { type: "sandbox.ready", runId: "r", workDir: "/w", at: "2026-11-26T00:00:00Z" } as const;

describe("the clone token", () => {
  test("is revoked when the sandbox is ready, at once when no mirror is catching up", async () => {
    const { run, revoked } = world();
    await withCloneToken(
      run,
      async ({ revokeOnReady }) => {
        revokeOnReady.emit(ready);
        await expect.poll(() => revoked).toEqual(["ghs_clone"]);
      },
      onHost,
    );
    expect(revoked).toEqual(["ghs_clone"]);
  });

  test("outlives the mirror's refresh, then goes", async () => {
    let finishRefresh = (): void => undefined;
    const refresh = new Promise<void>((resolve) => {
      finishRefresh = resolve;
    });
    const { run, revoked, asked } = world(() => refresh);
    await withCloneToken(
      run,
      async ({ revokeOnReady }) => {
        revokeOnReady.emit(ready);
        // The refresh is still fetching: the token must still work.
        await new Promise((resolve) => setImmediate(resolve));
        expect(revoked).toEqual([]);
        finishRefresh();
        await expect.poll(() => revoked).toEqual(["ghs_clone"]);
      },
      onHost,
    );
    expect(asked).toEqual([["installation-77", "4242"]]);
    expect(revoked).toEqual(["ghs_clone"]);
  });

  test("a refresh that never ends does not keep it past the run", async () => {
    const { run, revoked } = world(() => new Promise<void>(() => undefined));
    await withCloneToken(
      run,
      ({ revokeOnReady }) => {
        revokeOnReady.emit(ready);
        return Promise.resolve();
      },
      onHost,
    );
    expect(revoked).toEqual(["ghs_clone"]);
  });

  test("on Daytona, where the token was inside the sandbox, it goes at once, whatever a mirror does", async () => {
    const { run, revoked, asked } = world(() => new Promise<void>(() => undefined));
    await withCloneToken(
      run,
      async ({ revokeOnReady }) => {
        revokeOnReady.emit(ready);
        await expect.poll(() => revoked).toEqual(["ghs_clone"]);
      },
      { mirrorOnHost: false },
    );
    expect(asked).toEqual([]);
  });
});
