import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { logFormatConfig } from "../../src/adapters/logging/Logging.js"
import {
  describeUnknownVariable,
  ToolVariables,
  unknownVariables,
  variablesReadBy
} from "../../src/cli/EnvironmentNames.js"
import { logLevelConfig, Settings, settingsConfig } from "../../src/config.js"
import { claimDataDir, DataDirOfAnotherPrefix, dataDirPrefix, PrefixMarkerFile } from "../../src/roles/DataDirClaim.js"
import { projectRoot } from "../support/cli.js"

/** What main.ts knows: every name the settings and the log settings read, and the tools' own. */
const known = [...variablesReadBy([settingsConfig, logLevelConfig, logFormatConfig]), ...ToolVariables]

/** Every file under `dir` (recursively) whose name ends with one of `endings`. */
const filesUnder = (dir: string, endings: ReadonlyArray<string>): ReadonlyArray<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return filesUnder(path, endings)
    return endings.some((ending) => name.endsWith(ending)) ? [path] : []
  })

describe("the DOSTAVKA_* names the kit knows", () => {
  it("come from the settings themselves: every per-handler variant and every setting with a default or none", () => {
    expect(known).toEqual(expect.arrayContaining([
      "DOSTAVKA_AMQP_URL",
      "DOSTAVKA_DATA_DIR",
      "DOSTAVKA_PREFIX",
      "DOSTAVKA_HEALTH_PORT",
      "DOSTAVKA_TRUSTED_PUBLISHER",
      "DOSTAVKA_MANAGEMENT_URL",
      "DOSTAVKA_RETRY_DELAYS_MS",
      "DOSTAVKA_MAX_ATTEMPTS",
      "DOSTAVKA_CATALOG_RETRY_DELAYS_MS",
      "DOSTAVKA_CATALOG_MAX_ATTEMPTS",
      "DOSTAVKA_AUDIT_RETRY_DELAYS_MS",
      "DOSTAVKA_AUDIT_MAX_ATTEMPTS",
      "DOSTAVKA_LOG_LEVEL",
      "DOSTAVKA_LOG_FORMAT",
      "DOSTAVKA_TEST_LOGS",
      "DOSTAVKA_PROPERTY_RUNS",
      "DOSTAVKA_PROPERTY_SEED"
    ]))
  })

  it("include every name that src/, scripts/ and the test support read or set", () => {
    const files = [
      ...filesUnder(join(projectRoot, "src"), [".ts"]),
      ...filesUnder(join(projectRoot, "scripts"), [".ts", ".sh"]),
      ...filesUnder(join(projectRoot, "test", "support"), [".ts"]),
      join(projectRoot, ".ci", "run")
    ]
    // Docstrings are left out: they show misspellings on purpose.
    const code = (file: string) =>
      readFileSync(file, "utf8").split("\n").filter((line) => !/^\s*(\/\*\*|\*)/.test(line)).join("\n")
    const mentioned = new Set(
      files.flatMap((file) => [...code(file).matchAll(/\bDOSTAVKA_[A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0]))
    )
    expect([...mentioned].filter((name) => !known.includes(name))).toEqual([])
  })
})

describe("unknownVariables", () => {
  it("names each DOSTAVKA_* variable nothing reads, with the known name it is closest to when one is close", () => {
    const found = unknownVariables({
      DOSTAVKA_CATALOG_MAX_ATTEMPS: "3",
      DOSTAVKA_HTTPPORT: "9000",
      dostavka_prefix: "blue",
      DOSTAVKA_FOO: "1",
      DOSTAVKA_PREFIX: "ok",
      DOSTAVKA_TEST_LOGS: "1",
      HOME: "/root"
    }, known)
    expect(found.map(describeUnknownVariable)).toEqual([
      "DOSTAVKA_CATALOG_MAX_ATTEMPS is not a setting, and is ignored; did you mean DOSTAVKA_CATALOG_MAX_ATTEMPTS?",
      "DOSTAVKA_FOO is not a setting, and is ignored",
      "DOSTAVKA_HTTPPORT is not a setting, and is ignored; did you mean DOSTAVKA_HTTP_PORT?",
      "dostavka_prefix is not a setting, and is ignored; did you mean DOSTAVKA_PREFIX?"
    ])
  })

  it("is quiet when every name is known", () => {
    expect(unknownVariables(Object.fromEntries(known.map((name) => [name, "x"])), known)).toEqual([])
  })
})

describe("a data dir belongs to one prefix", () => {
  const inDir = (dataDir: string, prefix: string) => Layer.merge(Settings.with({ dataDir, prefix }), NodeContext.layer)

  it.effect("the first writer's prefix is written into its marker; the same prefix claims it again; another is refused naming both", () =>
    Effect.gen(function*() {
      const root = mkdtempSync(join(tmpdir(), "dostavka-marker-"))
      const dir = join(root, "var")
      try {
        expect(yield* dataDirPrefix.pipe(Effect.provide(inDir(dir, "blue")))).toEqual(Option.none())
        yield* claimDataDir.pipe(Effect.provide(inDir(dir, "blue")))
        expect(readFileSync(join(dir, PrefixMarkerFile), "utf8")).toBe("blue\n")
        yield* claimDataDir.pipe(Effect.provide(inDir(dir, "blue")))
        const refused = yield* Effect.flip(claimDataDir.pipe(Effect.provide(inDir(dir, "green"))))
        expect(refused).toBeInstanceOf(DataDirOfAnotherPrefix)
        expect(refused.message).toBe(
          `DOSTAVKA_DATA_DIR=${dir} holds the databases of prefix blue, and this is prefix green: ` +
            "set DOSTAVKA_DATA_DIR to a folder of its own for green (or DOSTAVKA_PREFIX=blue)"
        )
        expect(readFileSync(join(dir, PrefixMarkerFile), "utf8")).toBe("blue\n")
      } finally {
        rmSync(root, { recursive: true, force: true })
      }
    }))

  it.effect("a folder of an earlier version, with databases and no marker, is claimed as it is", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "dostavka-marker-"))
      try {
        writeFileSync(join(dir, "api.db"), "")
        yield* claimDataDir.pipe(Effect.provide(inDir(dir, "dostavka")))
        expect(yield* dataDirPrefix.pipe(Effect.provide(inDir(dir, "other")))).toEqual(Option.some("dostavka"))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))
})
