import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { sessionRecordsFile } from "../../src/cli/session-records.js";

describe("where harness run keeps its agents' session records", () => {
  test.each([
    [
      "HARNESS_DB when set, beside the App's runs",
      { HARNESS_DB: "/srv/harness.db", HARNESS_STATE_DIR: "/s" },
      "/srv/harness.db",
    ],
    ["else HARNESS_STATE_DIR", { HARNESS_STATE_DIR: "/s", XDG_STATE_HOME: "/x" }, "/s/sessions.db"],
    ["else $XDG_STATE_HOME/harness", { XDG_STATE_HOME: "/x", HOME: "/home/dev" }, "/x/harness/sessions.db"],
    [
      "a relative XDG_STATE_HOME is ignored",
      { XDG_STATE_HOME: "x", HOME: "/home/dev" },
      "/home/dev/.local/state/harness/sessions.db",
    ],
    ["else ~/.local/state/harness", { HOME: "/home/dev" }, "/home/dev/.local/state/harness/sessions.db"],
  ])("%s", (_label, env, path) => {
    expect(sessionRecordsFile(env)).toBe(path);
  });

  test("a relative HARNESS_STATE_DIR is taken from the current folder", () => {
    expect(sessionRecordsFile({ HARNESS_STATE_DIR: "state" })).toBe(join(process.cwd(), "state", "sessions.db"));
  });
});
