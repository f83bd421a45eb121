/** BenchFailure: a bench round that could not be measured (a baseline threw, a role died, a wait timed out). */
import { Data, Effect } from "effect"

export class BenchFailure extends Data.TaggedError("BenchFailure")<{ readonly what: string; readonly detail: string }> {
  override get message() {
    return `${this.what}: ${this.detail}`
  }
}

const describe = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** Runs a plain async baseline as an Effect; a rejection becomes a `BenchFailure` naming `what`. */
export const attempt = <A>(what: string, run: () => Promise<A>) =>
  Effect.tryPromise({ try: run, catch: (cause) => new BenchFailure({ what, detail: describe(cause) }) })

/** Any failure of `effect` as a `BenchFailure` naming `what` (the kit's typed errors keep their message). */
export const orBenchFailure =
  (what: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, BenchFailure, R> =>
    Effect.mapError(
      effect,
      (error) => (error instanceof BenchFailure ? error : new BenchFailure({ what, detail: describe(error) }))
    )
