import { Effect, Layer } from "effect"
import { HandlerInboxes } from "../../ports/HandlerInboxes.js"
import { Inbox } from "../../ports/Inbox.js"

/** `HandlerInboxes` over the one `Inbox` in context (the memory inbox keys receipts by handler, so one serves all). */
export const HandlerInboxesMemory = Layer.effect(
  HandlerInboxes,
  Effect.map(Inbox, (inbox) => ({ of: () => Effect.succeed(inbox) }))
)
