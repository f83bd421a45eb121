import { Command, Options } from "@effect/cli"
import { Clock, Console, Effect } from "effect"
import { Outbox, type OutboxMessage } from "../ports/Outbox.js"
import { Transaction } from "../ports/Transaction.js"
import { NothingFound, PartlyDone, UsageError } from "./DeadLetterCommands.js"
import { formatAge, idList, table } from "./Table.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))

const rowJson = (row: OutboxMessage) => ({
  sequence: row.sequence,
  event_id: row.envelope.messageId,
  type: row.envelope.type,
  created_at: new Date(row.createdAtMs).toISOString(),
  rejections: row.rejections,
  last_error: row.lastError,
  parked_at: row.parkedAtMs === null ? null : new Date(row.parkedAtMs).toISOString()
})

const list = Command.make(
  "list",
  {
    json,
    parked: Options.boolean("parked").pipe(
      Options.withDescription("the rows the relay parked after too many rejections")
    ),
    limit: Options.integer("limit").pipe(Options.withDefault(100), Options.withDescription("show at most this many"))
  },
  ({ json, limit, parked }) =>
    Effect.gen(function*() {
      if (limit < 1) return yield* new UsageError({ detail: `--limit ${limit} shows nothing: give 1 or more` })
      if (!parked) {
        return yield* new UsageError({
          detail: "outbox list shows parked rows: add --parked (the status command shows the pending ones)"
        })
      }
      const rows = yield* Effect.flatMap(Outbox, (o) => o.parked(limit))
      if (json) return yield* Console.log(JSON.stringify(rows.map(rowJson), null, 2))
      const now = yield* Clock.currentTimeMillis
      yield* Console.log(
        rows.length === 0 ? "no parked rows" : table(
          ["SEQUENCE", "EVENT ID", "REJECTIONS", "PARKED", "LAST ERROR"],
          rows.map((
            r
          ) => [
            String(r.sequence),
            r.envelope.messageId,
            String(r.rejections),
            formatAge(r.parkedAtMs, now),
            r.lastError ?? ""
          ])
        )
      )
    })
).pipe(Command.withDescription("list the outbox rows the relay parked"))

const retry = Command.make(
  "retry",
  {
    json,
    ids: Options.text("id").pipe(
      Options.withPseudoName("EVENT_ID"),
      Options.repeated,
      Options.withDescription("a parked row's event id, as outbox list --parked shows it (repeatable)")
    ),
    all: Options.boolean("all").pipe(Options.withDescription("every parked row"))
  },
  ({ all, ids, json }) =>
    Effect.gen(function*() {
      if (ids.length > 0 === all) {
        return yield* new UsageError({ detail: "give --id EVENT_ID (repeatable) or --all, one of them" })
      }
      const asked = [...new Set(ids.map((id) => id.toLowerCase()))]
      // Which of the ids asked for name a parked row, read in the release's transaction.
      const { notParked, released } = yield* Effect.flatMap(Transaction, (t) =>
        t.run(Effect.gen(function*() {
          const outbox = yield* Outbox
          if (all) return { released: yield* outbox.release("all"), notParked: [] }
          const parkedIds = (yield* outbox.find(asked)).filter((row) => row.parkedAtMs !== null).map((row) =>
            row.envelope.messageId.toLowerCase()
          )
          return {
            released: yield* outbox.release(parkedIds),
            notParked: asked.filter((id) => !parkedIds.includes(id))
          }
        })))
      yield* Console.log(
        json
          ? JSON.stringify({ released, not_parked: notParked })
          : `released ${released} parked row(s); the relay publishes them again now${
            notParked.length > 0 ? `\nnot parked or not known: ${notParked.length}: ${idList(notParked)}` : ""
          }`
      )
      if (notParked.length === 0) return
      const detail =
        `${notParked.length} of the ${asked.length} id(s) name no parked row; outbox list --parked shows them`
      return yield* (released === 0
        ? new NothingFound({ detail: `released nothing: ${detail}` })
        : new PartlyDone({ detail: `released ${released} of ${asked.length}: ${detail}` }))
    })
).pipe(Command.withDescription("release parked rows after the topology is fixed: the relay publishes them again"))

/** `dostavka outbox list --parked | retry (--id … | --all)`: parked outbox rows. Needs the API owner's stores. */
export const outboxCommand = Command.make("outbox").pipe(
  Command.withDescription("see and release the outbox rows the relay parked"),
  Command.withSubcommands([list, retry])
)
