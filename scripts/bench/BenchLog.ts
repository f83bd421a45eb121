/**
 * BenchLog: where the bench's own progress goes (stderr, with the seconds since the
 * start, so that stdout holds only the report), and how the kit's log lines are shown
 * when the kit runs in the bench process: its warnings and errors only, prefixed `kit:`.
 */
import { Effect, Logger, LogLevel } from "effect"

const startedAt = Date.now()

/** A progress line on stderr. */
export const say = (text: string) =>
  Effect.sync(() =>
    globalThis.console.error(`bench ${((Date.now() - startedAt) / 1000).toFixed(0).padStart(4)}s  ${text}`)
  )

/** The kit's warnings and errors, one logfmt line each on stderr. */
export const kitLogger = Logger.make<unknown, void>((options) => {
  if (LogLevel.greaterThanEqual(options.logLevel, LogLevel.Warning)) {
    globalThis.console.error(`kit: ${Logger.logfmtLogger.log(options)}`)
  }
})

/** The bench process's logging: `kitLogger` in place of Effect's default logger. */
export const BenchLogging = Logger.replace(Logger.defaultLogger, kitLogger)
