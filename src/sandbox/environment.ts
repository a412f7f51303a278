/**
 * The environment a sandboxed command starts from. Nothing is inherited wholesale from the
 * harness process, whose environment holds the GitHub App key, tokens and API keys: only
 * these harmless variables pass through, and callers add what one command needs.
 */
const PASS_THROUGH = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR"];

export function sandboxBaseEnv(source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASS_THROUGH) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  env["PATH"] ??= "/usr/local/bin:/usr/bin:/bin";
  // A command must never stop to ask for a password: there is nobody to answer.
  env["GIT_TERMINAL_PROMPT"] = "0";
  return env;
}

/**
 * Environment for the harness's own git processes: no system or global git config (so a
 * developer's `insteadOf` rules or credential helpers cannot change what a run does), and,
 * when a token is given, an HTTP Authorization header carried in `GIT_CONFIG_*` variables.
 * The token therefore lives only in that one process's environment: it is never written to
 * `.git/config`, a remote URL, or a command line visible in `ps`.
 */
export function gitEnv(token?: string, source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env = sandboxBaseEnv(source);
  env["GIT_CONFIG_NOSYSTEM"] = "1";
  // Push errors are classified from git's own words; a translated git would defeat that.
  env["LC_ALL"] = "C";
  delete env["LANGUAGE"];
  env["GIT_CONFIG_GLOBAL"] = "/dev/null";
  return { ...env, ...gitCredentialEnv(token) };
}

/**
 * The `GIT_CONFIG_*` variables that give one git process an HTTP credential (GitHub's
 * `x-access-token:<token>` Basic scheme) and disable credential helpers, so git neither
 * prompts nor falls back to a credential stored on the machine.
 */
export function gitCredentialEnv(token?: string): Record<string, string> {
  const config: Array<[string, string]> = [["credential.helper", ""]];
  if (token !== undefined && token !== "") {
    const basic = Buffer.from(`x-access-token:${token}`).toString("base64");
    config.push(["http.extraHeader", `Authorization: Basic ${basic}`]);
  }
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(config.length) };
  config.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${String(index)}`] = key;
    env[`GIT_CONFIG_VALUE_${String(index)}`] = value;
  });
  return env;
}
