import { Context, Effect, Layer, Ref } from "effect"

/** One readiness check's result: `detail` says what is wrong when it failed. */
export interface CheckResult {
  readonly name: string
  readonly ok: boolean
  readonly detail?: string
}

/**
 * What this process must have to do its work, as each role registers it: its database
 * open, its broker connection up, its topology declared. `GET /readyz` answers 200 when
 * every check passes and 503 naming the failed ones otherwise.
 */
export interface ReadinessShape {
  /** Adds `check` under `name`; it fails with what is wrong. */
  readonly register: (name: string, check: Effect.Effect<void, string>) => Effect.Effect<void>
  readonly check: Effect.Effect<ReadonlyArray<CheckResult>>
}

export class Readiness extends Context.Tag("dostavka/Readiness")<Readiness, ReadinessShape>() {
  static readonly layer = Layer.effect(
    Readiness,
    Effect.map(Ref.make<ReadonlyArray<readonly [string, Effect.Effect<void, string>]>>([]), (checks) => ({
      register: (name, check) =>
        Ref.update(checks, (all) => [...all.filter(([n]) => n !== name), [name, check] as const]),
      check: Effect.flatMap(Ref.get(checks), (all) =>
        Effect.forEach(all, ([name, check]) =>
          check.pipe(
            Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => "did not answer within 2 s" }),
            Effect.match({
              onSuccess: (): CheckResult => ({ name, ok: true }),
              onFailure: (detail): CheckResult => ({ name, ok: false, detail })
            })
          ), { concurrency: "unbounded" }))
    }))
  )
}

/** Registers a check when a `Readiness` is in context, and does nothing otherwise. */
export const registerCheck = (name: string, check: Effect.Effect<void, string>) =>
  Effect.flatMap(
    Effect.serviceOption(Readiness),
    (readiness) => (readiness._tag === "Some" ? readiness.value.register(name, check) : Effect.void)
  )
