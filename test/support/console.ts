import { Console, Effect } from "effect"

/**
 * What an effect prints through Effect's `Console`, kept instead of written: `log`
 * (stdout) and `error` (stderr) lines, each call's arguments joined by a space. Every
 * other method is the default console's.
 */
export const capturedConsole = Effect.gen(function*() {
  const printed = { stdout: [] as Array<string>, stderr: [] as Array<string> }
  const base = yield* Console.consoleWith(Effect.succeed)
  const console: Console.Console = {
    ...base,
    log: (...args) => Effect.sync(() => printed.stdout.push(args.join(" "))),
    error: (...args) => Effect.sync(() => printed.stderr.push(args.join(" ")))
  }
  return { printed, capture: <A, E, R>(effect: Effect.Effect<A, E, R>) => Console.withConsole(effect, console) }
})
