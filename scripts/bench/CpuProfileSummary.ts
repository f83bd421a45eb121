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
 * of the whole profile). tsx runs the project's TypeScript as esbuild's output, whitespace
 * minified, so V8 places its functions on line 1 at some column; the source maps tsx keeps
 * in its cache (`<tmpdir>/tsx-<uid>/`) turn those back into the `.ts` file's lines.
 */
import { readdirSync, readFileSync } from "node:fs"
import { tmpdir, userInfo } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

interface ProfileNode {
  readonly id: number
  readonly children?: ReadonlyArray<number>
  readonly callFrame: {
    readonly functionName: string
    readonly url: string
    readonly lineNumber: number
    readonly columnNumber: number
  }
}

interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const projectDir = fileURLToPath(new URL("../..", import.meta.url))

const Base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

/** Per generated line, its segments as [generated column, original line (0-based)], from a v3 source map's `mappings`. */
const decodeMappings = (mappings: string): Array<Array<readonly [number, number]>> => {
  const lines: Array<Array<readonly [number, number]>> = []
  let sourceLine = 0
  for (const line of mappings.split(";")) {
    const segments: Array<readonly [number, number]> = []
    let column = 0
    for (const segment of line.split(",")) {
      if (segment === "") continue
      const fields: Array<number> = []
      let value = 0
      let shift = 0
      for (const char of segment) {
        const digit = Base64.indexOf(char)
        value += (digit & 31) << shift
        if (digit & 32) shift += 5
        else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1)
          value = 0
          shift = 0
        }
      }
      column += fields[0] ?? 0
      if (fields.length >= 4) {
        sourceLine += fields[2]!
        segments.push([column, sourceLine])
      }
    }
    lines.push(segments)
  }
  return lines
}

/** Source maps of the project's files as tsx last compiled them, by absolute path. */
const tsxMaps = (() => {
  const maps = new Map<string, Array<Array<readonly [number, number]>>>()
  const dir = join(tmpdir(), `tsx-${userInfo().uid}`)
  let entries: Array<string> = []
  try {
    entries = readdirSync(dir)
  } catch {
    return maps
  }
  for (const entry of entries) {
    try {
      const cached = JSON.parse(readFileSync(join(dir, entry), "utf8")) as {
        map?: { sources?: Array<string>; mappings?: string }
      }
      const source = cached.map?.sources?.[0]
      if (source?.startsWith(projectDir) && cached.map?.mappings !== undefined) {
        maps.set(source, decodeMappings(cached.map.mappings))
      }
    } catch {
      // not a cached module
    }
  }
  return maps
})()

/** The original line (1-based) of a generated position, when tsx's map of the file is known. */
const originalLine = (path: string, line: number, column: number): number | undefined => {
  const segments = tsxMaps.get(path)?.[line]
  if (segments === undefined) return undefined
  let found: number | undefined
  for (const [col, srcLine] of segments) {
    if (col > column) break
    found = srcLine + 1
  }
  return found
}

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
/** Time with the function anywhere on the stack, for the project's own files only. */
const inclusive = new Map<string, number>()
const byFile = new Map<string, number>()
const byPackage = new Map<string, number>()
let total = 0
let idle = 0
for (const path of files) {
  const profile = JSON.parse(readFileSync(path, "utf8")) as Profile
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const keyOf = (frame: ProfileNode["callFrame"]) => {
    const path = frame.url.startsWith("file://") ? fileURLToPath(frame.url) : frame.url
    const line = originalLine(path, frame.lineNumber, frame.columnNumber) ?? frame.lineNumber + 1
    return `${frame.functionName || "(anonymous)"}  ${fileOf(frame.url)}:${line}`
  }
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
    add(byFunction, keyOf(frame))
    const seen = new Set<string>()
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = nodes.get(at)!.callFrame
      if (!f.url.includes(projectDir) && !f.url.startsWith(`file://${projectDir}`)) continue
      const rel = fileOf(f.url)
      if (rel.includes("node_modules") || !(rel.startsWith("src/") || rel.startsWith("scripts/"))) continue
      const key = keyOf(f)
      if (!seen.has(key)) {
        seen.add(key)
        add(inclusive, key)
      }
    }
    add(byFile, file)
    add(byPackage, packageOf(file))
  })
}

const busy = total - idle
const print = (title: string, map: Map<string, number>, filter?: (key: string) => boolean, kind = "self time") => {
  console.log(`\n${title} (${kind}, % of the ${Math.round(busy)} ms not idle)`)
  const rows = [...map.entries()].filter(([k]) => filter === undefined || filter(k)).sort((a, b) => b[1] - a[1]).slice(
    0,
    top
  )
  for (const [key, ms] of rows) {
    console.log(`${ms.toFixed(0).padStart(8)} ms ${((100 * ms) / busy).toFixed(1).padStart(5)}%  ${key}`)
  }
}

console.log(`${files.length} profile(s): ${Math.round(total)} ms sampled, ${Math.round(idle)} ms idle`)
print("by package", byPackage)
print("by file", byFile, match === undefined ? undefined : (k) => k.includes(match))
print("by function", byFunction, match === undefined ? undefined : (k) => k.includes(match))
print(
  "the project's functions",
  inclusive,
  match === undefined ? undefined : (k) => k.includes(match),
  "inclusive: time with the function anywhere on the stack"
)
