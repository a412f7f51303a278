/** The repository cache keeps each installation's mirrors apart: this is the installation's part of a mirror's key. */
export function mirrorScopeOf(installationId: number): string {
  return `installation-${String(installationId)}`;
}
