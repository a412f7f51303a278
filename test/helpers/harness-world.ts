import type { FakeApp, FakeGitHub } from "../fakes/github/server.js";

/** The installation id the app tests deliver webhooks for. */
export const INSTALLATION_ID = 77;

/**
 * The GitHub every app test starts from: the Harness App (id `appId`) installed on acme with
 * the permissions it asks for, acme/widgets holding a README, and `maintainer` with write
 * access to it.
 */
export async function installHarness(
  github: FakeGitHub,
  options: { appId: number; installationId?: number },
): Promise<FakeApp> {
  const app = github.addApp({ id: options.appId, slug: "harness" });
  github.addInstallation({
    id: options.installationId ?? INSTALLATION_ID,
    appId: app.id,
    account: "acme",
    permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
  });
  await github.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" } });
  github.setCollaborator("acme", "widgets", "maintainer", "write");
  return app;
}
