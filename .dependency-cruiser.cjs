/**
 * The layers of src/, lowest first. A module may import its own layer and the ones below, never
 * one above, and no import may close a cycle. `npm run lint` checks it (depcruise).
 *
 *   0  util, contracts, store          vocabulary and storage plumbing
 *   1  sandbox, agents, github,        adapters to the outside world
 *      gateway
 *   2  delivery, harness               the engine and the write path
 *   3  config                          repository configuration
 *   4  runs, pulls, triggers, web,     the app's services, and named sandboxes
 *      audit, metrics, setup,          for people and agents (and their MCP server)
 *      sandboxes, mcp
 *   5  runtime, doctor, cli, src/*.ts  composition: settings, wiring, the set-up's checks,
 *                                      entry points
 */
const LAYERS = [
  ["util", "contracts", "store"],
  ["sandbox", "agents", "github", "gateway"],
  ["delivery", "harness"],
  ["config"],
  ["runs", "pulls", "triggers", "web", "audit", "metrics", "setup", "sandboxes", "mcp"],
  ["runtime", "doctor", "cli"],
];

const folders = (layers) => `^src/(${layers.flat().join("|")})/`;

const upward = LAYERS.slice(0, -1).map((layer, index) => ({
  name: `layer-${String(index)}-imports-upward`,
  comment: `${layer.join(", ")} may not import a higher layer (${LAYERS.slice(index + 1)
    .flat()
    .join(", ")} or src/*.ts)`,
  severity: "error",
  from: { path: folders([layer]) },
  to: { path: [folders(LAYERS.slice(index + 1)), "^src/[^/]+\\.ts$"] },
}));

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "An import cycle: modules that need each other cannot be understood, tested or moved one at a time",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "src-imports-tests",
      comment: "Production code never imports test or bench code",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^(test|bench)/" },
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
