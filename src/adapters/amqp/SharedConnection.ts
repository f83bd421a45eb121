import { type Duration, Effect, RcRef, type Scope } from "effect"
import { describeCause } from "../../domain/errors.js"
import type { AmqpChannel, AmqpClient, AmqpConnection } from "./AmqpClient.js"
import {
  type BrokerAccess,
  type BrokerRefused,
  BrokerUnavailable,
  closeQuietly,
  openConnection
} from "./AmqpConnection.js"

/** One broker connection that many short reads share (see `makeSharedConnection`). */
export interface SharedConnection {
  /**
   * Runs `use` on a channel of its own (a passive declare of a missing queue closes its
   * channel, 404), opened on the shared connection and closed after `use`. Fails with
   * `BrokerUnavailable` or `BrokerRefused` when the connection cannot be had.
   */
  readonly withChannel: <A, E>(
    use: (channel: AmqpChannel) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | BrokerUnavailable | BrokerRefused>
}

/**
 * A connection named `name` (its `connection_name` on the broker) shared by every read
 * of the process that asks through it: opened on first use, kept while used and for
 * `idleTimeToLive` after, opened again after it was lost. However many reads run at once,
 * the process holds at most this one connection: a status request repeated 1,000 times
 * must not open 1,000 (each costs the broker a file handle, and a read of each queue).
 * Needs `AmqpClient` and a `Scope`, which closes the connection.
 */
export const makeSharedConnection = (
  access: BrokerAccess,
  name: string,
  idleTimeToLive: Duration.DurationInput
): Effect.Effect<SharedConnection, never, AmqpClient | Scope.Scope> =>
  Effect.gen(function*() {
    const ref: RcRef.RcRef<AmqpConnection, BrokerUnavailable | BrokerRefused> = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        const connection = yield* openConnection(access, name)
        // A lost connection is opened again by the next read, not reused.
        const forget = () => Effect.runFork(RcRef.invalidate(ref))
        connection.on("error", () => {})
        connection.on("close", forget)
        return connection
      }),
      idleTimeToLive
    })
    return {
      withChannel: (use) =>
        Effect.scoped(Effect.gen(function*() {
          const connection = yield* RcRef.get(ref)
          const channel = yield* Effect.acquireRelease(
            Effect.tryPromise({
              try: () => connection.createChannel(),
              catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describeCause(cause)}` })
            }).pipe(Effect.tapError(() => RcRef.invalidate(ref))),
            (channel) => closeQuietly(() => channel.close())
          )
          channel.on("error", () => {})
          return yield* use(channel)
        }))
    }
  })
