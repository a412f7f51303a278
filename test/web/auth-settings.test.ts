import { describe, expect, it } from "vitest";
import { createGitHubAuth } from "../../src/web/auth/github-auth.js";
import { githubWebUrlFor, webAuthSetupFromEnv } from "../../src/web/auth/settings.js";
import { SettingsError } from "../../src/util/errors.js";

const SECRET = "s".repeat(32);
const FULL = {
  GITHUB_CLIENT_ID: "Iv1.abc",
  GITHUB_CLIENT_SECRET: "shh-0123456789",
  HARNESS_PUBLIC_URL: "https://harness.example.com",
  HARNESS_SESSION_SECRET: SECRET,
};

describe("webAuthSetupFromEnv", () => {
  it("is off, with the reason, when no OAuth credentials are set", () => {
    expect(webAuthSetupFromEnv({}, "https://api.github.com")).toEqual({
      enabled: false,
      reason: "GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET are not set",
    });
  });

  it("is off when only the manifest flow's client credentials are set (no public URL yet)", () => {
    expect(
      webAuthSetupFromEnv({ GITHUB_CLIENT_ID: "Iv1.abc", GITHUB_CLIENT_SECRET: "x" }, "https://api.github.com"),
    ).toEqual({ enabled: false, reason: "HARNESS_PUBLIC_URL is not set" });
  });

  it("is on for github.com with everything set", () => {
    expect(webAuthSetupFromEnv(FULL, "https://api.github.com")).toEqual({
      enabled: true,
      settings: {
        clientId: "Iv1.abc",
        clientSecret: "shh-0123456789",
        sessionSecret: SECRET,
        publicUrl: "https://harness.example.com",
        githubWebUrl: "https://github.com",
        apiBaseUrl: "https://api.github.com",
        admins: [],
      },
    });
  });

  it("reads HARNESS_ADMINS, and refuses an entry that is no login or id", () => {
    const setup = webAuthSetupFromEnv({ ...FULL, HARNESS_ADMINS: "Ops-Lead,583231" }, "https://api.github.com");
    expect(setup.enabled && setup.settings.admins).toEqual(["ops-lead", "583231"]);
    expect(() => webAuthSetupFromEnv({ ...FULL, HARNESS_ADMINS: "ops lead's" }, "https://api.github.com")).toThrow(
      /HARNESS_ADMINS holds "lead's"/,
    );
  });

  it("derives the GHES web root from the API base", () => {
    const setup = webAuthSetupFromEnv(FULL, "https://ghes.example.com/api/v3");
    expect(setup.enabled && setup.settings.githubWebUrl).toBe("https://ghes.example.com");
    expect(githubWebUrlFor("http://127.0.0.1:8080/api/v3/")).toBe("http://127.0.0.1:8080");
    expect(githubWebUrlFor("https://api.octocorp.ghe.com")).toBe("https://octocorp.ghe.com");
  });

  it.each([
    [{ ...FULL, HARNESS_SESSION_SECRET: undefined }, /HARNESS_SESSION_SECRET is not set.*openssl rand -hex 32/],
    [{ ...FULL, HARNESS_SESSION_SECRET: "short" }, /HARNESS_SESSION_SECRET is too short \(5 characters\)/],
    [{ ...FULL, GITHUB_CLIENT_SECRET: undefined }, /GITHUB_CLIENT_SECRET is not set/],
    [{ ...FULL, GITHUB_CLIENT_ID: undefined }, /GITHUB_CLIENT_ID is not set/],
    [{ ...FULL, HARNESS_PUBLIC_URL: undefined }, /HARNESS_SESSION_SECRET is set but HARNESS_PUBLIC_URL is not/],
    [{ ...FULL, HARNESS_PUBLIC_URL: "harness.example.com" }, /HARNESS_PUBLIC_URL is not a URL/],
    [{ ...FULL, HARNESS_PUBLIC_URL: "ftp://harness.example.com" }, /must start with https:\/\//],
    [{ ...FULL, HARNESS_PUBLIC_URL: "https://example.com/harness" }, /without a path/],
  ])("refuses half a configuration with a message naming what to set (%#)", (env, message) => {
    expect(() => webAuthSetupFromEnv(env, "https://api.github.com")).toThrow(SettingsError);
    expect(() => webAuthSetupFromEnv(env, "https://api.github.com")).toThrow(message);
  });

  it("accepts a trailing slash on the public URL", () => {
    const setup = webAuthSetupFromEnv(
      { ...FULL, HARNESS_PUBLIC_URL: "https://harness.example.com/" },
      "https://api.github.com",
    );
    expect(setup.enabled && setup.settings.publicUrl).toBe("https://harness.example.com");
  });
});

describe("createGitHubAuth", () => {
  it("refuses a short session secret itself, too", () => {
    expect(() =>
      createGitHubAuth({
        clientId: "a",
        clientSecret: "b",
        githubWebUrl: "https://github.com",
        apiBaseUrl: "https://api.github.com",
        publicUrl: "https://h.example",
        sessionSecret: "short",
      }),
    ).toThrow(/at least 32 characters/);
  });

  it("builds the sign-in link against the configured GitHub web root", () => {
    const auth = createGitHubAuth({
      clientId: "a",
      clientSecret: "b",
      githubWebUrl: "https://github.com",
      apiBaseUrl: "https://api.github.com",
      publicUrl: "https://h.example",
      sessionSecret: SECRET,
      fetch: () => Promise.reject(new Error("no network in this test")),
    });
    expect(auth.loginUrl("/runs/7")).toBe("/auth/login?returnTo=%2Fruns%2F7");
  });
});
