import { Context, type Effect, type Scope } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import type { HandlerName } from "../domain/HandlerName.js"
import type { InboxShape } from "./Inbox.js"

/**
 * Every handler's inbox, read by an observer that is not the handler (the status view,
 * reconciliation). Contract: `of(handler)` opens that handler's inbox for the caller's
 * scope, read-only in production, and fails with `PersistenceError` when its database
 * cannot be opened (not created yet, or kept on another machine).
 */
export interface HandlerInboxesShape {
  readonly of: (handler: HandlerName) => Effect.Effect<InboxShape, PersistenceError, Scope.Scope>
}

export class HandlerInboxes extends Context.Tag("dostavka/HandlerInboxes")<HandlerInboxes, HandlerInboxesShape>() {}
