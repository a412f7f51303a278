import { describe, expect, test } from "vitest";
import { RepoRefError } from "../../src/util/errors.js";
import { githubCloneUrl, parseGitHubRepo } from "../../src/util/github.js";

// parseGitHubRepo's contract, case by case.
describe("parseGitHubRepo", () => {
  test("org/repo shorthand", () => {
    expect(parseGitHubRepo("acme/widgets")).toEqual({ owner: "acme", name: "widgets" });
  });

  test("full HTTPS URL", () => {
    expect(parseGitHubRepo("https://github.com/acme/widgets")).toEqual({ owner: "acme", name: "widgets" });
  });

  test("full HTTPS URL with .git suffix", () => {
    expect(parseGitHubRepo("https://github.com/acme/widgets.git")).toEqual({ owner: "acme", name: "widgets" });
  });

  test("rejects non-GitHub host", () => {
    expect(() => parseGitHubRepo("https://gitlab.com/acme/widgets")).toThrow();
  });

  test("rejects bare name (no slash)", () => {
    expect(() => parseGitHubRepo("widgets")).toThrow();
  });

  test("rejects local path", () => {
    expect(() => parseGitHubRepo("./my-project")).toThrow();
    expect(() => parseGitHubRepo("/Users/x/repo")).toThrow();
  });
});

describe("parseGitHubRepo: extensions", () => {
  test.each([
    ["SSH scp form", "git@github.com:acme/widgets.git"],
    ["SSH scp form without .git", "git@github.com:acme/widgets"],
    ["ssh:// URL", "ssh://git@github.com/acme/widgets.git"],
    ["trailing slash", "https://github.com/acme/widgets/"],
    ["www host", "https://www.github.com/acme/widgets"],
    ["surrounding whitespace", "  acme/widgets\n"],
  ])("accepts %s", (_label, ref) => {
    expect(parseGitHubRepo(ref)).toEqual({ owner: "acme", name: "widgets" });
  });

  test("accepts names with dots, dashes and underscores", () => {
    expect(parseGitHubRepo("my-org/my_repo.js")).toEqual({ owner: "my-org", name: "my_repo.js" });
  });

  test("accepts the configured GitHub Enterprise host, in https and SSH form", () => {
    const serverUrl = "https://ghe.example.com";
    expect(parseGitHubRepo("https://ghe.example.com/platform/api.git", { serverUrl })).toEqual({
      owner: "platform",
      name: "api",
    });
    expect(parseGitHubRepo("git@ghe.example.com:platform/api.git", { serverUrl })).toEqual({
      owner: "platform",
      name: "api",
    });
    expect(parseGitHubRepo("https://github.com/platform/api", { serverUrl })).toEqual({
      owner: "platform",
      name: "api",
    });
  });

  test("rejects an Enterprise host that is not configured", () => {
    expect(() => parseGitHubRepo("https://ghe.example.com/platform/api")).toThrow(/not GitHub/);
    expect(() => parseGitHubRepo("git@gitlab.com:acme/widgets.git")).toThrow(/not GitHub/);
  });

  test.each([
    ["an owner with a space", "ac me/widgets"],
    ["an owner starting with a hyphen", "-acme/widgets"],
    ["an owner of 40 characters", `${"a".repeat(40)}/widgets`],
    ["an owner with a dot", "ac.me/widgets"],
    ["a name with a slash-free shell trick", "acme/$(id)"],
    ["a name of ..", "acme/.."],
    ["a name of 101 characters", `acme/${"r".repeat(101)}`],
    ["a path with three parts", "acme/widgets/extra"],
    ["an empty reference", ""],
    ["a file:// URL", "file:///srv/git/widgets.git"],
    ["a URL with a query trick", "https://github.com/acme/widgets?x=/../evil"],
  ])("rejects %s with a readable, typed error", (_label, ref) => {
    expect(() => parseGitHubRepo(ref)).toThrow(RepoRefError);
  });

  test("the error says what is expected", () => {
    expect(() => parseGitHubRepo("widgets")).toThrow(/expected owner\/name/);
  });

  test("githubCloneUrl builds the https clone URL, on github.com or the Enterprise server", () => {
    expect(githubCloneUrl({ owner: "acme", name: "widgets" })).toBe("https://github.com/acme/widgets.git");
    expect(githubCloneUrl({ owner: "acme", name: "widgets" }, "https://ghe.example.com/")).toBe(
      "https://ghe.example.com/acme/widgets.git",
    );
  });
});

describe("parseGitHubRepo: credentials", () => {
  test("refuses a URL carrying a password and does not echo it", () => {
    const secret = "s3cr3t-value";
    let message = "";
    try {
      parseGitHubRepo(`https://user:${secret}@github.com/acme/widgets`);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/GITHUB_TOKEN/);
    expect(message).not.toContain(secret);
  });
});
