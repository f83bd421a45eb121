import { Context, Data, Effect, Layer, Ref } from "effect"
import { registerCheck } from "./Readiness.js"

/** Where one of this process's broker connections stands. Times are ms since the epoch. */
export type ConnectionState = Data.TaggedEnum<{
  /** Not opened yet (a publisher opens its connection on first use). */
  Idle: {}
  Up: { readonly since: number }
  /** The broker refuses to read from it (`connection.blocked`: a memory or disk alarm). */
  Blocked: { readonly since: number; readonly reason: string }
  /** Lost or never reached; `attempt` counts the failed attempts since `since`. */
  Reconnecting: { readonly since: number; readonly attempt: number; readonly error: string }
}>
export const ConnectionState = Data.taggedEnum<ConnectionState>()

/**
 * The broker connections of this process, by name (`relay-publisher`, `catalog-consumer`,
 * …), as their owners report them: for the status view and readiness. Reporting never
 * fails and never blocks.
 */
export interface BrokerConnectionsShape {
  readonly report: (name: string, state: ConnectionState) => Effect.Effect<void>
  readonly all: Effect.Effect<ReadonlyMap<string, ConnectionState>>
}

export class BrokerConnections
  extends Context.Tag("dostavka/BrokerConnections")<BrokerConnections, BrokerConnectionsShape>()
{
  static readonly layer = Layer.effect(
    BrokerConnections,
    Effect.map(Ref.make<ReadonlyMap<string, ConnectionState>>(new Map()), (states) => ({
      report: (name, state) => Ref.update(states, (all) => new Map(all).set(name, state)),
      all: Ref.get(states)
    }))
  )
}

/** Reports `state` for `name` when a registry is in context, and does nothing otherwise (a test, an operator command). */
export const reportConnection = (name: string, state: ConnectionState) =>
  Effect.flatMap(
    Effect.serviceOption(BrokerConnections),
    (registry) => (registry._tag === "Some" ? registry.value.report(name, state) : Effect.void)
  )

/** A readiness check: the connection named `name` is up, and not blocked by the broker. */
export const connectionCheck = (name: string): Effect.Effect<void, string, BrokerConnections> =>
  Effect.flatMap(BrokerConnections, (registry) =>
    Effect.flatMap(registry.all, (all) => {
      const state = all.get(name)
      if (state?._tag === "Up") return Effect.void
      if (state === undefined || state._tag === "Idle") return Effect.fail(`${name} is not connected yet`)
      return Effect.fail(
        state._tag === "Blocked"
          ? `${name} is blocked by the broker: ${state.reason}`
          : `${name} is reconnecting (attempt ${state.attempt}): ${state.error}`
      )
    }))

/**
 * Registers `connectionCheck(name)` as the readiness check `broker:<name>` when both a
 * registry and a `Readiness` are in context; does nothing otherwise.
 */
export const registerConnectionCheck = (name: string) =>
  Effect.flatMap(Effect.serviceOption(BrokerConnections), (registry) =>
    registry._tag === "Some"
      ? registerCheck(`broker:${name}`, Effect.provideService(connectionCheck(name), BrokerConnections, registry.value))
      : Effect.void)
