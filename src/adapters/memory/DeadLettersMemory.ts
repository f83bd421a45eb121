import { Context, Effect, Layer, Ref } from "effect"
import type { HandlerName } from "../../domain/HandlerName.js"
import {
  type DeadLetter,
  DeadLetters,
  type DeadLetterSelection,
  isSelected,
  missingIds
} from "../../ports/DeadLetters.js"

/**
 * What the in-memory dead-letter queues hold, per handler, and what was replayed to each
 * handler's queue, in order: a test arranges the first and reads the second.
 */
export class DeadLettersMemoryState extends Context.Tag("dostavka/DeadLettersMemoryState")<DeadLettersMemoryState, {
  readonly queues: Ref.Ref<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>
  readonly replayed: Ref.Ref<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>
}>() {}

/** The letters of `letters` that `selection` takes, by their place in the queue. */
const chosen = (selection: DeadLetterSelection, letters: ReadonlyArray<DeadLetter>) =>
  letters.filter((letter, position) => isSelected(selection, letter.messageId, position))

/** The in-memory twin of `DeadLettersAmqp`: a replay moves a letter to `replayed` with its replay count incremented and its attempts reset. */
export const DeadLettersMemory = Layer.effectContext(Effect.gen(function*() {
  const queues = yield* Ref.make<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>({ catalog: [], audit: [] })
  const replayed = yield* Ref.make<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>({ catalog: [], audit: [] })
  const port = DeadLetters.of({
    list: (handler, limit) => Effect.map(Ref.get(queues), (q) => q[handler].slice(0, limit)),
    replay: (handler, selection, { dryRun }) =>
      Effect.gen(function*() {
        const letters = (yield* Ref.get(queues))[handler]
        const selected = chosen(selection, letters)
        const moving = selected.filter((l) => l.headersRefused === undefined)
        if (!dryRun) {
          yield* Ref.update(queues, (q) => ({ ...q, [handler]: letters.filter((l) => !moving.includes(l)) }))
          yield* Ref.update(replayed, (r) => ({
            ...r,
            [handler]: [...r[handler], ...moving.map((l) => ({ ...l, attempts: 0, replays: l.replays + 1 }))]
          }))
        }
        return {
          moved: moving.map((l) => l.messageId),
          failed: [],
          undecodable: selected.filter((l) => !moving.includes(l)).map((l) => l.messageId),
          notFound: missingIds(selection, letters.map((l) => l.messageId))
        }
      }),
    purge: (handler, selection) =>
      Ref.modify(queues, (q) => {
        const letters = q[handler]
        const moving = chosen(selection, letters)
        return [
          {
            moved: moving.map((l) => l.messageId),
            failed: [],
            undecodable: [],
            notFound: missingIds(selection, letters.map((l) => l.messageId))
          },
          { ...q, [handler]: letters.filter((l) => !moving.includes(l)) }
        ]
      })
  })
  return Context.make(DeadLetters, port).pipe(Context.add(DeadLettersMemoryState, { queues, replayed }))
}))
