import { Duration, Effect, RcRef, type Scope } from "effect"
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
   * channel, 404), opened on the shared connection and closed after `use`, all within the
   * connection's `operationTimeout`. Fails with `BrokerUnavailable` when that passes or the
   * connection cannot be had, and `BrokerRefused` when the broker refuses it. A read that
   * timed out keeps the connection (a busy process answers late too); one the heartbeat
   * finds dead is opened again by the next read.
   */
  readonly withChannel: <A, E>(
    use: (channel: AmqpChannel) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | BrokerUnavailable | BrokerRefused>
}

/**
 * A connection named `name` (its `connection_name` on the broker) shared by every read
 * of the process that asks through it: opened on first use, kept while used and for
 * `idleTimeToLive` after, opened again after it was lost; no read waits longer than
 * `operationTimeout`. However many reads run at once,
 * the process holds at most this one connection: a status request repeated 1,000 times
 * must not open 1,000 (each costs the broker a file handle, and a read of each queue).
 * Needs `AmqpClient` and a `Scope`, which closes the connection.
 */
export const makeSharedConnection = (
  access: BrokerAccess,
  name: string,
  idleTimeToLive: Duration.DurationInput,
  operationTimeout: Duration.DurationInput
): Effect.Effect<SharedConnection, never, AmqpClient | Scope.Scope> =>
  Effect.gen(function*() {
    const ref: RcRef.RcRef<AmqpConnection, BrokerUnavailable | BrokerRefused> = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        const connection = yield* openConnection(access, name)
        // A lost connection is opened again by the next read, not reused.
        connection.on("error", () => {})
        connection.on("close", () => Effect.runFork(forget))
        return connection
      }),
      idleTimeToLive
    })
    // The next read opens another connection at once; this one is closed meanwhile, which on a
    // broker that stopped answering waits for the heartbeat: no read waits for that.
    const forget = Effect.asVoid(Effect.forkDaemon(RcRef.invalidate(ref)))
    return {
      withChannel: (use) =>
        Effect.scoped(Effect.gen(function*() {
          const connection = yield* RcRef.get(ref)
          const channel = yield* Effect.acquireRelease(
            Effect.tryPromise({
              try: () => connection.createChannel(),
              catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describeCause(cause)}` })
            }).pipe(Effect.tapError(() => forget)),
            (channel) => closeQuietly(() => channel.close())
          )
          channel.on("error", () => {})
          return yield* use(channel)
        })).pipe(
          // A broker that stopped answering (a paused VM, a cut network) holds a read until the
          // heartbeat gives up, twice its interval: the view must not wait that long. Opening a
          // channel is uninterruptible, so the read is left to finish in the background.
          Effect.disconnect,
          Effect.timeoutFail({
            duration: operationTimeout,
            onTimeout: () =>
              new BrokerUnavailable({
                detail: `no answer within ${Duration.format(Duration.decode(operationTimeout))}`
              })
          })
        )
    }
  })
