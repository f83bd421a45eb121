/**
 * The hexagon, enforced (`npm run lint`, and test/architecture.test.ts): the domain, the
 * ports and the use cases (`src/app`) import no adapter, no role, no job, no broker client and no
 * database or platform library; the domain imports no port or use case either. Paths are
 * matched anywhere under a `src/` folder, so the test's fixture tree is checked by the same
 * rules. Reference: dependency-cruiser's rules reference, "forbidden".
 */
const drivers =
  "node_modules/(amqplib|@effect/sql|@effect/sql-sqlite-node|better-sqlite3|@effect/platform|@effect/platform-node)/"

/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "domain-is-pure",
      comment:
        "The domain imports only effect and itself: no port, use case, adapter, role, broker or database library.",
      severity: "error",
      from: { path: "(^|/)src/domain/" },
      to: { path: ["(^|/)src/(ports|app|adapters|roles|jobs|cli)/", drivers] }
    },
    {
      name: "ports-import-the-domain-only",
      comment: "Ports are interfaces over the domain: no use case, adapter, role, broker or database library.",
      severity: "error",
      from: { path: "(^|/)src/ports/" },
      to: { path: ["(^|/)src/(app|adapters|roles|jobs|cli)/", drivers] }
    },
    {
      name: "use-cases-know-no-adapter",
      comment: "Use cases talk to ports: no adapter, role, broker or database library.",
      severity: "error",
      from: { path: "(^|/)src/app/" },
      to: { path: ["(^|/)src/(adapters|roles|jobs|cli)/", drivers] }
    },
    {
      name: "no-circular",
      comment: "A cycle makes the layers' order meaningless and module initialisation order-dependent.",
      severity: "error",
      from: {},
      to: { circular: true }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] }
  }
}
