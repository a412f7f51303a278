/**
 * A setup secret the operator grants a repository (HARNESS_SETUP_SECRETS): `repo` is
 * `owner/name` or `owner/*`; `name` is the environment variable holding the value.
 */
export interface SetupSecretGrant {
  repo: string;
  name: string;
}
