import type { IncomingMessage, ServerResponse } from "node:http";
export interface Viewer {
  login: string;
  id: number;
}
export interface WebAuth {
  /** Answers /auth/login, /auth/callback and /auth/logout; true when it answered. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** The signed-in viewer; undefined for no, forged or expired session cookie. */
  viewer(req: IncomingMessage): Promise<Viewer | undefined>;
  /** Whether GitHub says the viewer can read the repository (user token, cached briefly). */
  canRead(viewer: Viewer, repo: { owner: string; name: string }): Promise<boolean>;
  /** Where to send a signed-out viewer so they come back to `returnTo` after signing in. */
  loginUrl(returnTo: string): string;
}
