import { Cause, Context, Data, Deferred, Effect, Layer, Ref, type Scope } from "effect"
import { describeCause } from "../domain/errors.js"

/** A role can no longer do its work: a loop of it ended, or it hit a fault it must not work past. */
export class RoleFailed extends Data.TaggedError("RoleFailed")<{
  readonly role: string
  /** What ended it, one line, no stack trace. */
  readonly reason: string
}> {
  override get message() {
    return `${this.role}: ${this.reason}`
  }
}

/**
 * The fate of the process's roles. A role's long-running loops (a consumer, the relay)
 * run under `supervise`; a fault that makes going on unsafe (the database file removed
 * under the process) is reported with `halt`. Either makes `failed` fail with
 * `RoleFailed`, and the entry point then shuts every role down and exits non-zero, so a
 * supervisor (systemd, a container runtime) restarts the process instead of it living on
 * with a dead loop. Interruption, the normal way a loop ends at shutdown, is not a failure.
 */
export interface SupervisorShape {
  /**
   * Forks `loop` into the caller's scope, its log lines annotated `role=<role>`. If it ever ends other than by interruption (it
   * fails, dies, or returns), the role named `role` has failed, with the cause as reason.
   */
  readonly supervise: <E, R>(
    role: string,
    loop: Effect.Effect<unknown, E, R>
  ) => Effect.Effect<void, never, R | Scope.Scope>
  /** Reports that `role` must stop, with `reason`; the first report wins. */
  readonly halt: (role: string, reason: string) => Effect.Effect<void>
  /** Waits until a supervised loop ends or `halt` is called. */
  readonly failed: Effect.Effect<never, RoleFailed>
  /**
   * Marks the process as stopping: a wait that may be cut short (a write waiting for a
   * database lock another process holds) gives up at once, so that requests in progress
   * get their answer (a 503) while the server drains.
   */
  readonly beginStop: Effect.Effect<void>
  /** True once `beginStop` ran. */
  readonly stopping: Effect.Effect<boolean>
}

export class Supervisor extends Context.Tag("dostavka/Supervisor")<Supervisor, SupervisorShape>() {
  static readonly layer = Layer.effect(
    Supervisor,
    Effect.gen(function*() {
      const failure = yield* Deferred.make<never, RoleFailed>()
      const stopping = yield* Ref.make(false)
      const halt = (role: string, reason: string) =>
        Effect.asVoid(Deferred.fail(failure, new RoleFailed({ role, reason })))
      const supervise: SupervisorShape["supervise"] = (role, loop) =>
        Effect.asVoid(Effect.forkScoped(
          loop.pipe(
            Effect.annotateLogs({ role }),
            Effect.matchCauseEffect({
              onSuccess: () => halt(role, "its loop ended"),
              onFailure: (cause) =>
                Cause.isInterruptedOnly(cause) ? Effect.void : halt(role, describeCause(Cause.squash(cause)))
            })
          )
        ))
      return {
        supervise,
        halt,
        failed: Deferred.await(failure),
        beginStop: Ref.set(stopping, true),
        stopping: Ref.get(stopping)
      }
    })
  )
}
