/** The main job's progress line: what it shows, where, and how often. */
import { Console, Context, Effect, Option, Ref, Schedule } from "effect"
import { type HandlerName, HandlerNames } from "../domain/HandlerName.js"

/** Where the job is: posting the data set, or waiting for each receiver's receipts of the `of` accepted events. */
export type Progress =
  | { readonly phase: "sending"; readonly sent: number; readonly total: number }
  | { readonly phase: "applying"; readonly of: number; readonly applied: Readonly<Record<HandlerName, number>> }

/** The progress as one line: `sent 120/237`, then `applied catalog 180/221, audit 221/221`. */
const describeProgress = (progress: Progress): string =>
  progress.phase === "sending"
    ? `sent ${progress.sent}/${progress.total}`
    : `applied ${HandlerNames.map((h) => `${h} ${progress.applied[h]}/${progress.of}`).join(", ")}`

/** Where the progress line goes: `show` one line, and `end` once after the last one shown. */
export interface ProgressDisplayShape {
  readonly show: (line: string) => Effect.Effect<void>
  readonly end: Effect.Effect<void>
}

/**
 * On a terminal each line replaces the one before (carriage return, then ECMA-48 EL
 * `CSI 2 K` erases the line), and `end` moves to a new line, so the report starts on a
 * line of its own. A log line written meanwhile follows the progress line on the same
 * row: the roles log warnings and errors only (`withJobLogLevel`), which are rare.
 */
const terminalDisplay = (stream: NodeJS.WriteStream): ProgressDisplayShape => ({
  show: (line) =>
    Effect.sync(() => {
      stream.write(`\r\x1b[2K${line}`)
    }),
  end: Effect.sync(() => {
    stream.write("\n")
  })
})

/** Anywhere else (a pipe, a file, a CI log): one plain line each, no control sequence. */
const plainDisplay: ProgressDisplayShape = { show: (line) => Console.error(line), end: Effect.void }

/**
 * The job's progress display, stderr by default (so stdout holds the report alone): in
 * place on a terminal (`process.stderr.isTTY`), plain lines otherwise. A test provides a
 * recording one.
 */
export class ProgressDisplay extends Context.Reference<ProgressDisplay>()("dostavka/ProgressDisplay", {
  defaultValue: (): ProgressDisplayShape => (process.stderr.isTTY ? terminalDisplay(process.stderr) : plainDisplay)
}) {}

/** How often the progress line may be shown: at most once a second, and only when its text changed. */
export const progressInterval = Schedule.spaced("1 second")

/**
 * Shows `progress` on the `ProgressDisplay` on `progressInterval`, the first time one
 * interval after it starts (a job done sooner shows nothing), and never the same line
 * twice in a row. Runs until interrupted, and then ends the display if it showed anything.
 */
const showProgress = (progress: Ref.Ref<Progress>) =>
  Effect.gen(function*() {
    const display = yield* ProgressDisplay
    const shown = yield* Ref.make(Option.none<string>())
    const tick = Effect.gen(function*() {
      const line = describeProgress(yield* Ref.get(progress))
      if (!Option.contains(yield* Ref.getAndSet(shown, Option.some(line)), line)) yield* display.show(line)
    })
    return yield* Effect.schedule(tick, progressInterval).pipe(
      Effect.zipRight(Effect.never),
      Effect.ensuring(Effect.flatMap(Ref.get(shown), (s) => (Option.isSome(s) ? display.end : Effect.void)))
    )
  })

/** Runs `effect` with `progress` shown beside it; the display has ended when `effect` has. */
export const withProgress = (progress: Ref.Ref<Progress>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.raceFirst(effect, showProgress(progress))
