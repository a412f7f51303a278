import { failed, passed, type Check } from "../check.js";
import type { DoctorContext } from "../context.js";

/**
 * The environment read exactly as `npm start` reads it: a setting the server would refuse is
 * this check's failure (and every check that needs the settings is skipped, so it is said once).
 */
export function settingsCheck(): Check<DoctorContext> {
  return {
    id: "settings",
    name: "settings",
    run(context) {
      const reading = context.settings;
      if (!reading.ok)
        return Promise.resolve(failed(reading.problem, "correct that variable (.env.example lists every setting)"));
      const settings = reading.settings;
      if (settings.mode === "setup")
        return Promise.resolve(
          failed(
            "no GitHub App credentials (APP_ID, PRIVATE_KEY): `npm start` would serve the registration page",
            "register the App: `npm start` and open http://localhost:3000/ (or fill APP_ID, PRIVATE_KEY and " +
              "WEBHOOK_SECRET from .env.example)",
          ),
        );
      const queue = settings.queue?.kind ?? "sqlite";
      return Promise.resolve(
        passed(
          `App ${String(settings.appId)} on ${settings.apiBaseUrl}; sandbox ${settings.allowedSandboxes.join(", ")}; ` +
            `queue ${queue}; role ${settings.role ?? "all"}` +
            (settings.warnings.length > 0 ? `; warnings: ${settings.warnings.join("; ")}` : ""),
        ),
      );
    },
  };
}
