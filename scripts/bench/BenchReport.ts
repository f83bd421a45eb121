/**
 * BenchReport: the run's figures as text tables (ratios first, then every figure with its
 * min and max over the rounds), the same as JSON under `bench/results/`, and the quick
 * run's one summary line of ratios.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { cpus, release } from "node:os"
import { dirname, join } from "node:path"
import type { BenchBroker } from "./BenchBroker.js"
import type { BenchOptions } from "./BenchOptions.js"
import { show, type SuiteResult } from "./Figures.js"

export interface Machine {
  readonly cores: number
  readonly cpu: string
  readonly node: string
  readonly os: string
  readonly rabbitmq: string
  readonly erlang: string
  readonly amqplib: string
  readonly rascal: string
}

/** The installed version of a package (its package.json may not be exported, so it is found beside its entry point). */
const versionOf = (name: string): string => {
  try {
    let dir = dirname(createRequire(import.meta.url).resolve(name))
    for (let up = 0; up < 5; up++, dir = dirname(dir)) {
      const file = join(dir, "package.json")
      if (!existsSync(file)) continue
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string }
      if (pkg.name === name) return pkg.version ?? "unknown"
    }
  } catch {
    // not installed: said below
  }
  return "unknown"
}

export const machineOf = (broker: BenchBroker): Machine => ({
  cores: cpus().length,
  cpu: cpus()[0]?.model ?? "unknown",
  node: process.version,
  os: `${process.platform} ${release()}`,
  rabbitmq: broker.rabbitmqVersion,
  erlang: broker.erlangVersion,
  amqplib: versionOf("amqplib"),
  rascal: versionOf("rascal")
})

const table = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  rightAligned: ReadonlySet<number>
) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ").trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

export const renderTables = (results: ReadonlyArray<SuiteResult>): string => {
  const ratios = results.flatMap((r) =>
    r.ratios.map((x) => [x.name, show(x.median), show(x.min), show(x.max), x.meaning])
  )
  const figures = results.flatMap((r) =>
    r.figures.map((f) => [r.suite, f.name, show(f.median), show(f.min), show(f.max), f.unit, f.note ?? ""])
  )
  const notes = results.flatMap((r) => r.notes.map((n) => `- ${r.suite}: ${n}`))
  return [
    "RATIOS (same run, round by round; median of rounds, min, max)",
    table(["ratio", "median", "min", "max", "meaning"], ratios, new Set([1, 2, 3])),
    "",
    "FIGURES (median of rounds, min, max)",
    table(["suite", "figure", "median", "min", "max", "unit", "one round"], figures, new Set([2, 3, 4])),
    "",
    "HOW",
    ...notes
  ].join("\n")
}

/** One line of the headline ratios, for `--quick`. */
export const summaryLine = (results: ReadonlyArray<SuiteResult>): string =>
  `bench summary: ${results.flatMap((r) => r.headline.map(([name, value]) => `${name} ${show(value)}`)).join(" | ")}`

/** Writes the run as JSON to `bench/results/<time>[-quick].json`; returns the path. */
export const writeJson = (
  projectDir: string,
  options: BenchOptions,
  machine: Machine,
  startedAt: Date,
  results: ReadonlyArray<SuiteResult>
): string => {
  const dir = join(projectDir, "bench", "results")
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `${startedAt.toISOString().replace(/[:.]/g, "-")}${options.quick ? "-quick" : ""}.json`)
  writeFileSync(
    file,
    `${JSON.stringify({ startedAt: startedAt.toISOString(), options, machine, suites: results }, null, 2)}\n`
  )
  return file
}
