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
import { formatAge, idList, table } from "./Table.js"

/** A command line that asks for something the command cannot do; printed as one line, exit 2. */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/**
 * Nothing of what the command was asked for was found (an id no dead letter or parked
 * row has, an empty queue's head); printed as one line, exit 1. A selection of
 * everything (`--all`) that finds nothing is no miss: there was nothing to do.
 */
export class NothingFound extends Data.TaggedError("NothingFound")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/**
 * The command did part of its work, or none of it for a reason that may pass (a copy the
 * broker did not confirm): what it did is printed with its counts on stdout, and this one
 * line on stderr; exit 1, so that a script does not take it for done.
 */
export class PartlyDone extends Data.TaggedError("PartlyDone")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

const handler = Options.choice("handler", HandlerNames).pipe(
  Options.withDescription("the handler whose dead-letter queue to use")
)
const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))
const ids = Options.text("id").pipe(
  Options.withPseudoName("MESSAGE_ID"),
  Options.repeated,
  Options.withDescription("a dead letter's message id, as dead list shows it (repeatable)")
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

const bodyText = (body: Uint8Array): { readonly body: string; readonly bodyEncoding: "utf-8" | "base64" } => {
  try {
    return { body: new TextDecoder("utf-8", { fatal: true }).decode(body), bodyEncoding: "utf-8" }
  } catch {
    return { body: Buffer.from(body).toString("base64"), bodyEncoding: "base64" }
  }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/**
 * A header value as JSON: a 64-bit integer beyond ±(2^53 − 1) as its digits, bytes as
 * `{ "base64": … }`. Done before `JSON.stringify`, whose replacer sees a Buffer only after
 * `Buffer.prototype.toJSON` has made it `{ type, data }`.
 */
const jsonValue = (value: unknown): unknown =>
  typeof value === "bigint"
    ? value.toString()
    : value instanceof Uint8Array
    ? { base64: Buffer.from(value).toString("base64") }
    : Array.isArray(value)
    ? value.map(jsonValue)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonValue(v)]))
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
  properties: jsonValue(letter.properties),
  ...(letter.headersRefused === undefined ? {} : { headers_refused: letter.headersRefused }),
  ...bodyText(letter.body)
})

const printJson = (value: unknown) => Console.log(printableJson(JSON.stringify(jsonValue(value), null, 2)))

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
  {
    handler,
    json,
    id: Options.text("id").pipe(
      Options.withPseudoName("MESSAGE_ID"),
      Options.withDescription("the dead letter's message id, as dead list shows it")
    )
  },
  ({ handler, id, json }) =>
    Effect.gen(function*() {
      const letters = yield* Effect.flatMap(DeadLetters, (d) => d.list(handler, Number.MAX_SAFE_INTEGER))
      const letter = letters.find((l) => sameMessageId(l.messageId, id))
      if (letter === undefined) {
        return yield* new NothingFound({
          detail: `no dead letter with message id ${
            printable(id)
          } for ${handler}; dead list --handler ${handler} shows their ids`
        })
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

/**
 * What a move's exit says (`dostavka` exit codes): nothing when everything selected was
 * moved (an `--all` of an empty queue included); `NothingFound` when none of the ids
 * asked for, or no head, was there; `PartlyDone` when letters were left in place (not
 * confirmed by the broker, or undecodable) or some ids were not found, with the counts.
 */
const moveOutcome = (verb: string, handler: string, selection: DeadLetterSelection, move: DeadLetterMove) => {
  const left = move.failed.length + move.undecodable.length
  if (left === 0 && move.notFound.length === 0 && (selection._tag !== "Head" || move.moved.length > 0)) {
    return Effect.void
  }
  if (left === 0 && move.moved.length === 0) {
    return Effect.fail(
      new NothingFound({
        detail: selection._tag === "Head"
          ? `the dead queue of ${handler} is empty: nothing ${verb}`
          : `no dead letter of ${handler} has ${
            move.notFound.length === 1 ? "that id" : `any of those ${move.notFound.length} ids`
          }: nothing ${verb}; dead list --handler ${handler} shows their ids`
      })
    )
  }
  const parts = [
    move.failed.length > 0 ? `${move.failed.length} not confirmed by the broker (left in place; run it again)` : "",
    move.undecodable.length > 0 ? `${move.undecodable.length} undecodable (left in place; purge removes them)` : "",
    move.notFound.length > 0 ? `${move.notFound.length} not found` : ""
  ].filter((part) => part !== "")
  return Effect.fail(
    new PartlyDone({
      detail: `${verb} ${move.moved.length} of ${
        move.moved.length + left + move.notFound.length
      } dead letter(s) of ${handler}: ${parts.join(", ")}`
    })
  )
}

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
      const verb = dryRun ? "would replay" : "replayed"
      yield* printMove(verb, handler, move, json)
      yield* moveOutcome(verb, handler, selection, move)
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
      yield* moveOutcome("purged", handler, selection, move)
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
