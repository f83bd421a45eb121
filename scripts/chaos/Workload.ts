/**
 * Workload: what each client of a chaos run asks the publication API, drawn from the
 * seed. Every client owns a set of materials and publishes their revisions in order, so
 * its answers are predictable; on top of that:
 * - bursts: several revisions of one material in a few seconds (some back to back), so
 *   that revisions of one material are in flight together, reach the bus in one relay
 *   batch, and can be reordered by a re-publish or a retry queue (the catalog then
 *   records the older one `stale`);
 * - skips: a revision two above the current one (allowed: it only has to be greater);
 * - repeats: an earlier accepted request sent again, same Idempotency-Key and body,
 *   which must come back 202 with `Idempotent-Replayed` and the same ids;
 * - stale on purpose: a revision not above the current one, which must be a 409;
 * - contended materials, shared by every client, each sending the newest revision it
 *   knows plus one: races between clients end in 202 for one and 409 for the others.
 * Revisions are resolved when a request is sent (they depend on earlier answers); the
 * intents, materials, texts and pacing are fixed by the seed. A client that must go on
 * past its plan (faults still running) draws more intents the same way.
 */
import type { SeededRandom } from "./SeededRandom.js"

export type Intent =
  | { readonly kind: "next"; readonly material: string; readonly paced: boolean }
  | { readonly kind: "skip"; readonly material: string }
  | { readonly kind: "repeat"; readonly pick: number }
  | { readonly kind: "stale"; readonly material: string }
  | { readonly kind: "contended"; readonly material: string }

export interface ClientPlan {
  readonly client: number
  readonly intents: ReadonlyArray<Intent>
  /** Further intents, drawn on demand from a generator of their own, for when the load must go on past the plan. */
  readonly more: () => ReadonlyArray<Intent>
}

export interface WorkloadPlan {
  readonly clients: ReadonlyArray<ClientPlan>
  readonly ownMaterials: number
  readonly contendedMaterials: ReadonlyArray<string>
  readonly requests: number
}

export const materialOf = (client: number, i: number) => `chaos/c${client}/m${String(i).padStart(3, "0")}`

/** The next intents of client `c`: one, or a burst of 3–6 revisions of one material (half of the bursts sent back to back). */
const draw = (r: SeededRandom, c: number, perClient: number, contended: ReadonlyArray<string>): Array<Intent> => {
  const own = (): string => materialOf(c, r.int(0, perClient - 1))
  const roll = r.next()
  if (roll < 0.06) {
    const material = own()
    const paced = r.chance(0.5)
    return Array.from({ length: r.int(3, 6) }, (_, k) => ({ kind: "next", material, paced: paced || k === 0 }))
  }
  if (roll < 0.09) return [{ kind: "skip", material: own() }]
  if (roll < 0.14) return [{ kind: "repeat", pick: r.next() }]
  if (roll < 0.17) return [{ kind: "stale", material: own() }]
  if (roll < 0.23 && contended.length > 0) return [{ kind: "contended", material: r.pick(contended) }]
  return [{ kind: "next", material: own(), paced: true }]
}

/** `requests` intents spread over `clients`, each client owning `perClient` materials. */
export const planWorkload = (
  random: SeededRandom,
  requests: number,
  clients: number,
  perClient: number,
  contended: number
): WorkloadPlan => {
  const contendedMaterials = Array.from({ length: contended }, (_, i) => `chaos/shared/m${String(i).padStart(2, "0")}`)
  const plans: Array<ClientPlan> = []
  for (let c = 0; c < clients; c++) {
    const r = random.fork(`client-${c}`)
    const count = Math.floor(requests / clients) + (c < requests % clients ? 1 : 0)
    const intents: Array<Intent> = []
    while (intents.length < count) {
      intents.push(...draw(r, c, perClient, contendedMaterials).slice(0, count - intents.length))
    }
    const extra = random.fork(`client-${c}-more`)
    plans.push({ client: c, intents, more: () => draw(extra, c, perClient, contendedMaterials) })
  }
  return { clients: plans, ownMaterials: clients * perClient, contendedMaterials, requests }
}

/** A deterministic text of `length` characters for titles, summaries and bodies. */
export const textOf = (random: SeededRandom, length: number): string => {
  const words = [
    "quorum",
    "queue",
    "outbox",
    "relay",
    "confirm",
    "inbox",
    "revision",
    "catalog",
    "audit",
    "broker",
    "exchange",
    "binding",
    "delivery",
    "ack",
    "retry",
    "dead",
    "letter",
    "lease"
  ]
  let out = ""
  while (out.length < length) out += `${random.pick(words)} `
  return out.slice(0, length).trim() || "text"
}
