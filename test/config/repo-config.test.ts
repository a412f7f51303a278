import { describe, expect, test } from "vitest";
import { parseRepoConfig, RepoConfigError } from "../../src/config/repo-config.js";

describe(".github/harness.yml: sandbox.network and setup secrets", () => {
  test("network modes and allowlists parse; the defaults leave both unset (the operator's ceiling applies)", () => {
    expect(parseRepoConfig({}).sandbox).toEqual({});
    expect(
      parseRepoConfig({
        sandbox: { network: "allowlist", allow: ["registry.npmjs.org", "*.pythonhosted.org", "203.0.113.0/24"] },
      }).sandbox,
    ).toEqual({ network: "allowlist", allow: ["registry.npmjs.org", "*.pythonhosted.org", "203.0.113.0/24"] });
  });

  test.each([
    [{ sandbox: { network: "wide-open" } }, /`sandbox.network`/],
    [
      { sandbox: { network: "open", allow: ["example.com"] } },
      /`sandbox.allow` only applies with `sandbox.network: allowlist`/,
    ],
    [
      { sandbox: { network: "allowlist", allow: ["https://example.com/path"] } },
      /`sandbox.allow` .*https:\/\/example\.com\/path/,
    ],
    [{ sandbox: { network: "allowlist", allow: ["*.com"] } }, /`sandbox.allow`/],
    [{ setup_secrets: ["NPM_TOKEN"] }, /`setup_secrets` needs a `setup` command/],
    [{ setup: "npm ci", setup_secrets: ["npm-token"] }, /`setup_secrets.0`/],
  ])("%j is refused with the key named", (raw, message) => {
    expect(() => parseRepoConfig(raw)).toThrow(RepoConfigError);
    expect(() => parseRepoConfig(raw)).toThrow(message);
  });
});

describe(".github/harness.yml: sandbox.image and sandbox.images", () => {
  test("an image reference and a list of allowed ones parse as written", () => {
    expect(
      parseRepoConfig({ sandbox: { image: " ghcr.io/acme/runner:1.4 ", images: ["ghcr.io/acme/*", "node:22"] } })
        .sandbox,
    ).toEqual({ image: "ghcr.io/acme/runner:1.4", images: ["ghcr.io/acme/*", "node:22"] });
  });

  test.each([
    [{ sandbox: { image: "Acme/Runner" } }, /^\.github\/harness\.yml is invalid: `sandbox\.image` has upper-case/],
    [{ sandbox: { image: "ghcr.io/acme/runner:1 --privileged" } }, /`sandbox\.image` is not a Docker image reference/],
    [{ sandbox: { image: `ghcr.io/${"a".repeat(600)}` } }, /`sandbox\.image` is longer than 512 characters/],
    [{ sandbox: { image: "" } }, /`sandbox\.image`/],
    [{ sandbox: { images: [] } }, /`sandbox\.images`/],
    [{ sandbox: { images: ["ghcr.io/acme/*", "ghcr.io/*/x"] } }, /`sandbox\.images\.1` is not a Docker image/],
    [{ sandbox: { images: Array.from({ length: 101 }, () => "node:22") } }, /`sandbox\.images`/],
  ])("%j is refused with the key named", (raw, message) => {
    expect(() => parseRepoConfig(raw)).toThrow(RepoConfigError);
    expect(() => parseRepoConfig(raw)).toThrow(message);
  });
});
