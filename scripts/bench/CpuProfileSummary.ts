/**
 * CpuProfileSummary: the top self-time of one or more V8 `.cpuprofile` files (as written
 * by `node --cpu-prof`), by function (name, file:line), by file, and by package, with
 * the project's own files named relative to it. For reading where a bench suite's time
 * goes:
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx scripts/bench.ts --variant kit relay
 *   node --import tsx scripts/bench/CpuProfileSummary.ts /tmp/prof/*.cpuprofile [--top 30] [--match src/]
 *
 * `--match` keeps only the functions whose file contains the text (the totals stay those
 * of the whole profile).
 */
import { readFileSync } from "node:fs"
import { relative } from "node:path"
import { fileURLToPath } from "node:url"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}

interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const projectDir = fileURLToPath(new URL("../..", import.meta.url))

const fileOf = (url: string): string => {
  if (url === "") return "(native)"
  const path = url.startsWith("file://") ? fileURLToPath(url) : url
  return path.startsWith(projectDir) ? relative(projectDir, path) : path
}

const packageOf = (file: string): string => {
  const at = file.lastIndexOf("node_modules/")
  if (at >= 0) {
    const rest = file.slice(at + "node_modules/".length).split("/")
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  if (file.startsWith("node:") || file.startsWith("internal/")) return "(node)"
  if (file === "(native)") return "(native: GC, idle, program)"
  return file.split("/").slice(0, 2).join("/")
}

const args = process.argv.slice(2)
const top = Number(args[args.indexOf("--top") + 1] ?? 30) || 30
const match = args.includes("--match") ? args[args.indexOf("--match") + 1] : undefined
const files = args.filter((a, i) => a.endsWith(".cpuprofile") && args[i - 1] !== "--top" && args[i - 1] !== "--match")

const byFunction = new Map<string, number>()
const byFile = new Map<string, number>()
const byPackage = new Map<string, number>()
let total = 0
let idle = 0
for (const path of files) {
  const profile = JSON.parse(readFileSync(path, "utf8")) as Profile
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  profile.samples.forEach((id, i) => {
    const dt = (profile.timeDeltas[i] ?? 0) / 1000
    const frame = nodes.get(id)!.callFrame
    total += dt
    if (frame.functionName === "(idle)") {
      idle += dt
      return
    }
    const file = fileOf(frame.url)
    const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + dt)
    add(byFunction, `${frame.functionName || "(anonymous)"}  ${file}:${frame.lineNumber + 1}`)
    add(byFile, file)
    add(byPackage, packageOf(file))
  })
}

const busy = total - idle
const print = (title: string, map: Map<string, number>, filter?: (key: string) => boolean) => {
  console.log(`\n${title} (self time, % of the ${Math.round(busy)} ms not idle)`)
  const rows = [...map.entries()].filter(([k]) => filter === undefined || filter(k)).sort((a, b) => b[1] - a[1]).slice(0, top)
  for (const [key, ms] of rows) console.log(`${ms.toFixed(0).padStart(8)} ms ${((100 * ms) / busy).toFixed(1).padStart(5)}%  ${key}`)
}

console.log(`${files.length} profile(s): ${Math.round(total)} ms sampled, ${Math.round(idle)} ms idle`)
print("by package", byPackage)
print("by file", byFile, match === undefined ? undefined : (k) => k.includes(match))
print("by function", byFunction, match === undefined ? undefined : (k) => k.includes(match))
