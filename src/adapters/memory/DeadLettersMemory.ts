import { Context, Effect, Layer, Ref } from "effect"
import type { HandlerName } from "../../domain/HandlerName.js"
import { type DeadLetter, DeadLetters, type DeadLetterSelection } from "../../ports/DeadLetters.js"

/**
 * What the in-memory dead-letter queues hold, per handler, and what was replayed to each
 * handler's queue, in order: a test arranges the first and reads the second.
 */
export class DeadLettersMemoryState extends Context.Tag("dostavka/DeadLettersMemoryState")<DeadLettersMemoryState, {
  readonly queues: Ref.Ref<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>
  readonly replayed: Ref.Ref<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>
}>() {}

const chosen = (selection: DeadLetterSelection) => (letter: DeadLetter) =>
  selection._tag === "All" || selection.ids.includes(letter.messageId)

const notFound = (selection: DeadLetterSelection, letters: ReadonlyArray<DeadLetter>) =>
  selection._tag === "All" ? [] : selection.ids.filter((id) => !letters.some((l) => l.messageId === id))

/** The in-memory twin of `DeadLettersAmqp`: a replay moves a letter to `replayed` with its replay count incremented and its attempts reset. */
export const DeadLettersMemory = Layer.effectContext(Effect.gen(function*() {
  const queues = yield* Ref.make<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>({ catalog: [], audit: [] })
  const replayed = yield* Ref.make<Readonly<Record<HandlerName, ReadonlyArray<DeadLetter>>>>({ catalog: [], audit: [] })
  const port = DeadLetters.of({
    list: (handler, limit) => Effect.map(Ref.get(queues), (q) => q[handler].slice(0, limit)),
    replay: (handler, selection, { dryRun }) =>
      Effect.gen(function*() {
        const letters = (yield* Ref.get(queues))[handler]
        const moving = letters.filter(chosen(selection))
        if (!dryRun) {
          yield* Ref.update(queues, (q) => ({ ...q, [handler]: letters.filter((l) => !chosen(selection)(l)) }))
          yield* Ref.update(replayed, (r) => ({
            ...r,
            [handler]: [...r[handler], ...moving.map((l) => ({ ...l, attempts: 0, replays: l.replays + 1 }))]
          }))
        }
        return { moved: moving.map((l) => l.messageId), failed: [], notFound: notFound(selection, letters) }
      }),
    purge: (handler, selection) =>
      Ref.modify(queues, (q) => {
        const letters = q[handler]
        const moving = letters.filter(chosen(selection))
        return [
          { moved: moving.map((l) => l.messageId), failed: [], notFound: notFound(selection, letters) },
          { ...q, [handler]: letters.filter((l) => !chosen(selection)(l)) }
        ]
      })
  })
  return Context.make(DeadLetters, port).pipe(Context.add(DeadLettersMemoryState, { queues, replayed }))
}))
