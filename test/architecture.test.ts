import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"

const root = join(import.meta.dirname, "..", "src")
const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [])
const importsOf = (file: string) =>
  [...readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)[^"']*from\s+["']([^"']+)["']/gm)].map((m) => m[1]!)

/** Imports in `layer` that match `forbidden`, as "file → module". */
const violations = (layer: string, forbidden: RegExp) =>
  filesUnder(join(root, layer)).flatMap((file) =>
    importsOf(file).filter((m) => forbidden.test(m)).map((m) => `${relative(root, file)} → ${m}`))

describe("the hexagon", () => {
  it("the domain imports no adapter, port, app code, broker or database library", () => {
    expect(violations("domain", /adapters|ports|\/app\/|roles|amqplib|@effect\/sql|better-sqlite3|@effect\/platform/)).toEqual([])
  })

  it("ports import only the domain and effect", () => {
    expect(violations("ports", /adapters|\/app\/|roles|amqplib|@effect\/sql|better-sqlite3|@effect\/platform/)).toEqual([])
  })

  it("use cases import no adapter, broker or database library", () => {
    expect(violations("app", /adapters|roles|amqplib|@effect\/sql|better-sqlite3|@effect\/platform/)).toEqual([])
  })

  it("the check sees imports at all (it would otherwise pass on anything)", () => {
    expect(importsOf(join(root, "adapters", "amqp", "AmqpClient.ts"))).toContain("amqplib")
  })
})
