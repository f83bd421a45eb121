import { Command, Options } from "@effect/cli"
import { Clock, Console, Data, Effect } from "effect"
import { printable, printableJson } from "../adapters/logging/TerminalText.js"
import { HandlerNames } from "../domain/HandlerName.js"
import {
  type DeadLetter,
  type DeadLetterMove,
  DeadLetters,
  DeadLetterSelection,
  sameMessageId
} from "../ports/DeadLetters.js"
import { formatAge, table } from "./Table.js"

/** A command line that asks for something the command cannot do; printed as one line, exit 2. */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

const handler = Options.choice("handler", HandlerNames).pipe(
  Options.withDescription("the handler whose dead-letter queue to use")
)
const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))
const ids = Options.text("id").pipe(
  Options.repeated,
  Options.withDescription("a dead letter's message id (repeatable)")
)
const all = Options.boolean("all").pipe(Options.withDescription("every dead letter of the handler"))
const head = Options.boolean("head").pipe(
  Options.withDescription("the dead letter at the head of the queue, whatever it holds (one without a usable id)")
)

/** `--id …`, `--all` or (where offered) `--head`: exactly one of them. */
const selectionOf = (chosen: ReadonlyArray<string>, everything: boolean, first = false) => {
  const given = [chosen.length > 0, everything, first].filter(Boolean).length
  return given > 1
    ? Effect.fail(new UsageError({ detail: "give one of --id, --all and --head, not several" }))
    : given === 0
    ? Effect.fail(new UsageError({ detail: "give --id MESSAGE_ID (repeatable) or --all" }))
    : Effect.succeed(
      everything
        ? DeadLetterSelection.All()
        : first
        ? DeadLetterSelection.Head()
        : DeadLetterSelection.Ids({ ids: chosen })
    )
}

/** Ids printed in full before a list is summarised: a move of 50,000 letters prints counts, not 50,000 ids. */
const MaxListedIds = 20

/** `ids` for a terminal: each escaped (`printable`), at most `MaxListedIds` of them, then how many more. */
const idList = (ids: ReadonlyArray<string>): string =>
  ids.length <= MaxListedIds
    ? ids.map(printable).join(", ")
    : `${ids.slice(0, MaxListedIds).map(printable).join(", ")} and ${ids.length - MaxListedIds} more`

const bodyText = (body: Uint8Array): { readonly body: string; readonly bodyEncoding: "utf-8" | "base64" } => {
  try {
    return { body: new TextDecoder("utf-8", { fatal: true }).decode(body), bodyEncoding: "utf-8" }
  } catch {
    return { body: Buffer.from(body).toString("base64"), bodyEncoding: "base64" }
  }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** A header value as JSON: a 64-bit integer beyond ±(2^53 − 1) as its digits, bytes as `{ "base64": … }`. */
const jsonValue = (_key: string, value: unknown): unknown =>
  typeof value === "bigint"
    ? value.toString()
    : value instanceof Uint8Array
    ? { base64: Buffer.from(value).toString("base64") }
    : value

/** A dead letter as JSON: every field, its properties, and its body as text (base64 when not UTF-8). */
export const deadLetterJson = (letter: DeadLetter) => ({
  message_id: letter.messageId,
  handler: letter.handler,
  reason: letter.reason,
  error_tag: letter.errorTag,
  error: letter.error,
  attempts: letter.attempts,
  replays: letter.replays,
  first_failure_at: iso(letter.firstFailureAtMs),
  last_failure_at: iso(letter.lastFailureAtMs),
  dead_at: iso(letter.deadAtMs),
  original_exchange: letter.originalExchange,
  original_routing_key: letter.originalRoutingKey,
  properties: JSON.parse(JSON.stringify(letter.properties, jsonValue)) as unknown,
  ...(letter.headersRefused === undefined ? {} : { headers_refused: letter.headersRefused }),
  ...bodyText(letter.body)
})

const printJson = (value: unknown) => Console.log(printableJson(JSON.stringify(value, jsonValue, 2)))

const list = Command.make(
  "list",
  {
    handler,
    json,
    limit: Options.integer("limit").pipe(Options.withDefault(100), Options.withDescription("show at most this many"))
  },
  ({ handler, json, limit }) =>
    Effect.gen(function*() {
      if (limit < 1) return yield* new UsageError({ detail: `--limit ${limit} shows nothing: give 1 or more` })
      const letters = yield* Effect.flatMap(DeadLetters, (d) => d.list(handler, limit))
      if (json) {
        return yield* printJson(letters.map((l) => {
          const { body: _, bodyEncoding: __, properties: ___, ...summary } = deadLetterJson(l)
          return summary
        }))
      }
      const now = yield* Clock.currentTimeMillis
      yield* Console.log(
        letters.length === 0 ? `no dead letters for ${handler}` : table(
          ["MESSAGE ID", "REASON", "ATTEMPTS", "AGE", "ERROR"],
          letters.map((
            l
          ) =>
            [l.messageId, l.reason, String(l.attempts), formatAge(l.deadAtMs, now), `${l.errorTag}: ${l.error}`].map(
              printable
            )
          )
        )
      )
    })
).pipe(Command.withDescription("list a handler's dead letters, oldest first, without moving them"))

const show = Command.make(
  "show",
  { handler, json, id: Options.text("id") },
  ({ handler, id, json }) =>
    Effect.gen(function*() {
      const letters = yield* Effect.flatMap(DeadLetters, (d) => d.list(handler, Number.MAX_SAFE_INTEGER))
      const letter = letters.find((l) => sameMessageId(l.messageId, id))
      if (letter === undefined) {
        return yield* new UsageError({ detail: `no dead letter with message id ${printable(id)} for ${handler}` })
      }
      const view = deadLetterJson(letter)
      if (json) return yield* printJson(view)
      const { body, bodyEncoding, properties, ...fields } = view
      for (const [key, value] of Object.entries(fields)) {
        yield* Console.log(`${key.padEnd(22)}${printable(String(value ?? "-"))}`)
      }
      yield* Console.log(`${"properties".padEnd(22)}${printableJson(JSON.stringify(properties))}`)
      yield* Console.log(`${`body (${bodyEncoding})`.padEnd(22)}${printable(body)}`)
    })
).pipe(Command.withDescription("everything about one dead letter: its failure, its properties, its body"))

const printMove = (verb: string, handler: string, move: DeadLetterMove, json: boolean) =>
  json
    ? printJson(move)
    : Effect.gen(function*() {
      yield* Console.log(
        `${verb} ${move.moved.length} dead letter(s) of ${handler}${
          move.moved.length > 0 ? `: ${idList(move.moved)}` : ""
        }`
      )
      if (move.failed.length > 0) {
        yield* Console.log(`not confirmed by the broker, left in place: ${move.failed.length}: ${idList(move.failed)}`)
      }
      if (move.undecodable.length > 0) {
        yield* Console.log(
          `header table cannot be decoded, left in place (dead show shows it; purge --id or --head removes it): ${move.undecodable.length}: ${
            idList(move.undecodable)
          }`
        )
      }
      if (move.notFound.length > 0) yield* Console.log(`not found: ${move.notFound.length}: ${idList(move.notFound)}`)
    })

const replay = Command.make(
  "replay",
  {
    handler,
    json,
    ids,
    all,
    dryRun: Options.boolean("dry-run").pipe(Options.withDescription("show what would move, move nothing"))
  },
  ({ all, dryRun, handler, ids, json }) =>
    Effect.gen(function*() {
      const selection = yield* selectionOf(ids, all)
      const move = yield* Effect.flatMap(DeadLetters, (d) => d.replay(handler, selection, { dryRun }))
      yield* printMove(dryRun ? "would replay" : "replayed", handler, move, json)
    })
).pipe(Command.withDescription("send dead letters back to their handler's queue only, attempts reset"))

const purge = Command.make(
  "purge",
  {
    handler,
    json,
    ids,
    all,
    head,
    yes: Options.boolean("yes").pipe(Options.withDescription("confirm that the letters are to be deleted for good"))
  },
  ({ all, handler, head, ids, json, yes }) =>
    Effect.gen(function*() {
      const selection = yield* selectionOf(ids, all, head)
      if (!yes) return yield* new UsageError({ detail: "purge deletes dead letters for good; add --yes to do it" })
      const move = yield* Effect.flatMap(DeadLetters, (d) => d.purge(handler, selection))
      yield* printMove("purged", handler, move, json)
    })
).pipe(Command.withDescription("delete dead letters for good"))

/**
 * `dostavka dead list|show|replay|purge --handler H …`: an operator's view of a handler's
 * dead-letter queue (see the `DeadLetters` port). Needs `DeadLetters`.
 */
export const deadCommand = Command.make("dead").pipe(
  Command.withDescription("inspect, replay and purge a handler's dead letters"),
  Command.withSubcommands([list, show, replay, purge])
)
