import { link, mkdir, readdir, copyFile } from "node:fs/promises";
import { join } from "node:path";
import { hostGit, hostGitOrThrow } from "./safe-git.js";

/**
 * git's own checks of every object the bundle brought, in their strictest form. Debian's git
 * 2.39 imports a bundle without `fetch.fsckObjects` taking effect, and `index-pack --strict`
 * demands every blob an unchanged file names, which a partial clone of the base does not have.
 * So the pack the import wrote is linked, alone, into a second empty repository and `git fsck
 * --strict` reads it there: with no refs it walks no history (the base's objects are not
 * needed), while every object in the pack is checked — a `.gitmodules` whose url or path is an
 * option (`--upload-pack=…`), a tree entry that is `.git` in any case or git's HFS and NTFS
 * spellings of it, `..`, an empty or `/`-holding name, malformed commits — with `fsck.*` at its
 * defaults and warnings made errors.
 */

/**
 * What fsck may not find here: a `.gitmodules` or `.gitattributes` the change left as it was is
 * the base's, and not in the pack.
 */
const FSCK_CONFIG: ReadonlyArray<readonly [string, string]> = [
  ["fsck.gitmodulesMissing", "ignore"],
  ["fsck.gitattributesMissing", "ignore"],
];

/** The packs in `gitDir`'s object store, by file name. */
export async function packsIn(gitDir: string): Promise<Set<string>> {
  const names = await readdir(join(gitDir, "objects", "pack")).catch(() => []);
  return new Set(names.filter((name) => name.endsWith(".pack")));
}

/**
 * Checks the packs `gitDir` gained since `before` (the import's own; packs fetched from the
 * repository on demand, marked `.promisor`, are the base's and left out) in a repository made
 * under `dir`. Returns what git found, or undefined when it found nothing.
 */
export async function fsckImportedPacks(dir: string, gitDir: string, before: Set<string>): Promise<string | undefined> {
  const packDir = join(gitDir, "objects", "pack");
  const names = await readdir(packDir);
  const imported = names.filter(
    (name) => name.endsWith(".pack") && !before.has(name) && !names.includes(name.replace(/\.pack$/, ".promisor")),
  );
  if (imported.length === 0) return "its objects were not found after the import";

  const checkDir = join(dir, "check.git");
  await hostGitOrThrow(dir, "Creating the object-check repository", ["init", "--quiet", "--bare", checkDir], {
    timeout: 30_000,
  });
  const checkPacks = join(checkDir, "objects", "pack");
  await mkdir(checkPacks, { recursive: true });
  for (const pack of imported) {
    for (const name of [pack, pack.replace(/\.pack$/, ".idx")]) {
      // Linked, not copied: the same file system, and neither repository writes into a pack.
      await link(join(packDir, name), join(checkPacks, name)).catch(() =>
        copyFile(join(packDir, name), join(checkPacks, name)),
      );
    }
  }
  const fsck = await hostGit(checkDir, ["fsck", "--strict", "--no-dangling", "--no-reflogs", "--no-progress"], {
    config: FSCK_CONFIG,
    timeout: 300_000,
  });
  if (fsck.exitCode === 0) return undefined;
  return describeFsckErrors(`${fsck.stderr}\n${fsck.stdout}`);
}

/** "hasDotgit: contains '.git' (tree 02d1899b633f)", for at most three of git's findings. */
export function describeFsckErrors(output: string): string {
  const found = output
    .split("\n")
    .map((line) => /^error in (\w+) ([0-9a-f]{12})[0-9a-f]*: (\w+): (.*)$/.exec(line.trim()))
    .filter((match) => match !== null)
    .map(
      ([, type, sha, id, message]) =>
        `${String(id)}: ${String(message).slice(0, 200)} (${String(type)} ${String(sha)})`,
    );
  if (found.length === 0) {
    const last = output
      .trim()
      .split("\n")
      .filter((line) => !line.startsWith("notice:"))
      .slice(-1)[0];
    return `git's object check failed${last ? ` (${last.slice(0, 300)})` : ""}`;
  }
  const more = found.length > 3 ? ` and ${String(found.length - 3)} more` : "";
  return `git's object check found ${found.slice(0, 3).join("; ")}${more}`;
}
