/**
 * CpuProfiler: V8's sampling CPU profiler (the one `node --cpu-prof` starts) run over
 * exactly one measured window of the bench process, through the inspector, so that a
 * kit round's profile holds the kit's work and not the round's set-up (filling the
 * outbox or the queue). Writes `<dir>/<name>.cpuprofile`, readable by
 * `CpuProfileSummary` or Chrome's DevTools. Without a directory it runs the effect as it is.
 */
import { Effect } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { join } from "node:path"

/** Sampling interval in µs; `node --cpu-prof`'s default too. */
const IntervalUs = 1000

export const profiled =
  (dir: string | undefined, name: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    dir === undefined
      ? effect
      : Effect.acquireUseRelease(
        Effect.promise(async () => {
          const session = new Session()
          session.connect()
          await session.post("Profiler.enable")
          await session.post("Profiler.setSamplingInterval", { interval: IntervalUs })
          await session.post("Profiler.start")
          return session
        }),
        () => effect,
        (session) =>
          Effect.promise(async () => {
            const { profile } = await session.post("Profiler.stop")
            session.disconnect()
            mkdirSync(dir, { recursive: true })
            writeFileSync(join(dir, `${name}.cpuprofile`), JSON.stringify(profile))
          })
      )
