import { Context, type Effect } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/**
 * The unit of work of one service database.
 *
 * Contract: every store write made inside `run(effect)` commits together when `effect`
 * succeeds, and none of them is kept when it fails (or is interrupted). Transactions of
 * one database are serialized, so a read-then-write inside `run` sees no interleaving
 * writer. A nested `run` joins the outer transaction. Fails with `PersistenceError` when
 * the commit itself fails.
 */
export interface TransactionShape {
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
}

export class Transaction extends Context.Tag("dostavka/Transaction")<Transaction, TransactionShape>() {}
