/**
 * LogScan: reads every log file of a run for what must never be there (a stack trace,
 * the broker password) and counts its warning, error and fatal lines, keeping a few
 * examples of each finding with file and line number. It also collects, per file, the
 * message ids a receiver sent to a retry queue ("handler failed; retrying later").
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

/** A V8 stack frame line: `    at fn (file.ts:12:3)`, `    at file.ts:12:3`, `    at new X (<anonymous>)`. */
const stackFrame = /^\s+at\s+(?:.+\(.*(?::\d+:\d+|<anonymous>|native)\)|\S+:\d+:\d+)\s*$/

export interface LogFinding {
  readonly file: string
  readonly line: number
  readonly text: string
}

export interface LogScanResult {
  readonly files: number
  readonly stackTraceLines: number
  readonly passwordLines: number
  readonly examples: ReadonlyArray<LogFinding>
  /** Per file: lines at WARN, ERROR, FATAL. */
  readonly levels: ReadonlyMap<string, { warn: number; error: number; fatal: number }>
  /** Per file: the distinct messages of ERROR and FATAL lines, with how often each came. */
  readonly errorMessages: ReadonlyMap<string, ReadonlyMap<string, number>>
  /** Per file: message ids that went to a retry queue. */
  readonly retried: ReadonlyMap<string, ReadonlySet<string>>
}

export const scanLogs = (dir: string, password: string): LogScanResult => {
  const examples: Array<LogFinding> = []
  const levels = new Map<string, { warn: number; error: number; fatal: number }>()
  const errorMessages = new Map<string, Map<string, number>>()
  const retried = new Map<string, Set<string>>()
  let stackTraceLines = 0
  let passwordLines = 0
  const files = readdirSync(dir).filter((f) => f.endsWith(".log"))
  for (const file of files) {
    const counts = { warn: 0, error: 0, fatal: 0 }
    const messages = new Map<string, number>()
    const retriedHere = new Set<string>()
    const lines = readFileSync(join(dir, file), "utf8").split("\n")
    for (const [i, text] of lines.entries()) {
      if (stackFrame.test(text)) {
        stackTraceLines++
        if (examples.filter((e) => e.text.startsWith("stack")).length < 5) {
          examples.push({ file, line: i + 1, text: `stack: ${text.trim().slice(0, 200)}` })
        }
      }
      if (password !== "" && text.includes(password)) {
        passwordLines++
        if (examples.filter((e) => e.text.startsWith("password")).length < 5) {
          examples.push({
            file,
            line: i + 1,
            text: `password: ${text.split(password).join("<PASSWORD>").slice(0, 200)}`
          })
        }
      }
      if (text.includes("message=\"handler failed; retrying later\"")) {
        const id = /\bmessageId=(\S+)/.exec(text)?.[1]
        if (id !== undefined) retriedHere.add(id)
      }
      const level = /\blevel=(WARN|ERROR|FATAL)\b/.exec(text)?.[1]
      if (level === "WARN") counts.warn++
      if (level === "ERROR" || level === "FATAL") {
        if (level === "ERROR") counts.error++
        else counts.fatal++
        const message = /message=("(?:[^"\\]|\\.)*"|\S+)/.exec(text)?.[1] ?? text.slice(0, 80)
        messages.set(`${level} ${message}`, (messages.get(`${level} ${message}`) ?? 0) + 1)
      }
    }
    levels.set(file, counts)
    errorMessages.set(file, messages)
    retried.set(file, retriedHere)
  }
  return { files: files.length, stackTraceLines, passwordLines, examples, levels, errorMessages, retried }
}
