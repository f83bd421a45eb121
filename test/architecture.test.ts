import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { join } from "node:path"

/**
 * The hexagon's rules live in `.dependency-cruiser.cjs` (also run by `npm run lint`); here
 * they run on `src`, and on a fixture tree that breaks two of them, so the check is seen to
 * catch what it is meant to.
 */
const root = join(import.meta.dirname, "..")

interface Violation {
  readonly from: string
  readonly to: string
  readonly rule: { readonly name: string }
}

const cruise = (dir: string): ReadonlyArray<string> => {
  const run = spawnSync(process.execPath, [
    join(root, "node_modules", "dependency-cruiser", "bin", "dependency-cruise.mjs"),
    dir,
    "--config",
    ".dependency-cruiser.cjs",
    "--output-type",
    "json"
  ], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  if (run.stdout === "") throw new Error(`dependency-cruiser printed nothing: ${run.stderr}`)
  const result = JSON.parse(run.stdout) as { summary: { violations: ReadonlyArray<Violation>; totalCruised: number } }
  if (result.summary.totalCruised === 0) throw new Error(`dependency-cruiser saw no module in ${dir}`)
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)
}

describe("the hexagon", () => {
  it("domain, ports and use cases import no adapter, role, broker or database library, and nothing is circular", () => {
    expect(cruise("src")).toEqual([])
  }, 60_000)

  it("the rules catch a domain module importing amqplib and a use case importing an adapter", () => {
    expect([...cruise("test/fixtures/hexagon/src")].sort()).toEqual([
      "domain-is-pure: test/fixtures/hexagon/src/domain/Leak.ts → node_modules/amqplib/channel_api.js",
      "use-cases-know-no-adapter: test/fixtures/hexagon/src/app/Leak.ts → test/fixtures/hexagon/src/adapters/Store.ts"
    ])
  }, 60_000)
})
