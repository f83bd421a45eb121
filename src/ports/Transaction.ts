import { Context, type Effect } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/**
 * The unit of work of one service database.
 *
 * Contract: every store write made inside `run(effect)` commits together when `effect`
 * succeeds, and none of them is kept when it fails (or is interrupted). Transactions of
 * one database are serialized, so a read-then-write inside `run` sees no interleaving
 * writer. A nested `run` is a savepoint: when its effect fails, only its own writes are
 * undone and the outer transaction goes on. Fails with `PersistenceError` when the
 * transaction cannot begin or commit: `unavailable` when the database stayed locked past
 * the busy timeout, `lost` when its file was removed or replaced (nothing is committed).
 */
export interface TransactionShape {
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
}

export class Transaction extends Context.Tag("dostavka/Transaction")<Transaction, TransactionShape>() {}
