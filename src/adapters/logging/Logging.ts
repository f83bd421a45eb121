import { Cause, Config, Effect, Either, HashMap, Inspectable, Layer, List, Logger } from "effect"
import { ConfigError } from "effect"
import { logLevelConfig } from "../../config.js"
import { printable, printableJson } from "./TerminalText.js"

/** How log lines are written: `logfmt` (the default) or `json`, one object per line (`DOSTAVKA_LOG_FORMAT`). */
export const logFormatConfig = Config.string("DOSTAVKA_LOG_FORMAT").pipe(
  Config.withDefault("logfmt"),
  Config.mapOrFail((text) =>
    text === "logfmt" || text === "json"
      ? Either.right(text)
      : Either.left(
        ConfigError.InvalidData(
          [],
          `DOSTAVKA_LOG_FORMAT=${JSON.stringify(text.slice(0, 100))} is not accepted: use logfmt or json`
        )
      )
  )
)

/** A bigint (a 64-bit header value) as its decimal digits, which `JSON.stringify` would refuse. */
const jsonSafe = (_key: string, value: unknown) => (typeof value === "bigint" ? value.toString() : value)

/** `messageId` → `message_id`: the JSON lines' field names are snake_case, as the HTTP API's are. */
const snakeCase = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

const levelNames: Record<string, string> = {
  DEBUG: "debug",
  INFO: "info",
  WARN: "warning",
  ERROR: "error",
  FATAL: "fatal",
  TRACE: "trace"
}

/**
 * One JSON object per line on stderr: `time` (ISO 8601), `level` (debug, info, warning,
 * error, fatal), `message`, the annotations flat beside them in snake_case (`role`,
 * `handler`, `message_id`, `correlation_id`, `material_id`, `revision`, …), and `cause`
 * when there is one, in one line. Log
 * lines carry no credential (URLs are redacted before they reach a log) and no body.
 */
export const jsonLineLogger = Logger.make(({ annotations, cause, date, logLevel, message }) => {
  const line: Record<string, unknown> = {
    time: date.toISOString(),
    level: levelNames[logLevel.label] ?? logLevel.label.toLowerCase(),
    message: (List.isList(message) ? List.toArray(message) : Array.isArray(message) ? message : [message]).map((
      m
    ) => (typeof m === "string" ? m : Inspectable.toStringUnknown(m))).join(" ")
  }
  for (const [key, value] of HashMap.toEntries(annotations)) line[snakeCase(key)] = value
  if (!Cause.isEmpty(cause)) line.cause = Cause.pretty(cause).split("\n")[0]
  globalThis.console.error(printableJson(JSON.stringify(line, jsonSafe)))
})

/**
 * The process's logging, from the environment: the format (`DOSTAVKA_LOG_FORMAT`) and
 * the least severe level written (`DOSTAVKA_LOG_LEVEL`). Logs go to stderr, so a
 * command's own output (a report, a table, JSON) stays alone on stdout.
 */
export const LoggingLive = Layer.unwrapEffect(Effect.gen(function*() {
  const format = yield* logFormatConfig
  const level = yield* logLevelConfig
  // Annotations carry what came off the bus (ids, errors): no line may act on the terminal it is read in.
  const logger = format === "json"
    ? jsonLineLogger
    : Logger.withConsoleError(Logger.map(Logger.logfmtLogger, printable))
  return Layer.merge(Logger.replace(Logger.defaultLogger, logger), Logger.minimumLogLevel(level))
}))
