/** The main job's report: this run's answers, counted, and what the databases hold afterwards. */
import { Console, Data, HashSet, Option } from "effect"

/** What the job saw: the API's answers and what each receiver holds afterwards. */
export interface DeliveryReport {
  readonly requests: number
  readonly accepted: number
  readonly replayed: number
  readonly rejectedStale: number
  readonly rejectedOther: number
  readonly unexpected: number
  readonly published: number
  readonly pending: number
  readonly catalog: {
    readonly applied: number
    readonly stale: number
    readonly duplicates: number
    readonly entries: number
  }
  readonly audit: { readonly applied: number; readonly duplicates: number; readonly records: number }
}

/**
 * The job did not end as the data set says it must. When the receivers missed the
 * deadline, `report` is what they held by then (the job has printed it) and `detail`
 * ends with the likely cause (`likelyCauses`).
 */
export class DeliveryJobFailed extends Data.TaggedError("DeliveryJobFailed")<{
  readonly detail: string
  readonly report?: DeliveryReport | undefined
}> {
  override get message() {
    return this.detail
  }
}

/** How one request was answered: the `expect` values of the data set, or any other status. */
export type Outcome = "accepted" | "replay" | "stale" | `HTTP ${number}`

export interface Answer {
  readonly outcome: Outcome
  /** The event of a 202, new or replayed. */
  readonly eventId: Option.Option<string>
  readonly expected: boolean
}

/** This run's answers, counted. */
export interface Answers {
  readonly accepted: number
  readonly replayed: number
  readonly rejectedStale: number
  readonly rejectedOther: number
  readonly unexpected: number
  readonly eventIds: HashSet.HashSet<string>
}

export const noAnswers: Answers = {
  accepted: 0,
  replayed: 0,
  rejectedStale: 0,
  rejectedOther: 0,
  unexpected: 0,
  eventIds: HashSet.empty()
}

const count = (condition: boolean) => (condition ? 1 : 0)

/** `answers` with one more `answer` counted. */
export const tally = (answers: Answers, answer: Answer): Answers => ({
  accepted: answers.accepted + count(answer.outcome === "accepted"),
  replayed: answers.replayed + count(answer.outcome === "replay"),
  rejectedStale: answers.rejectedStale + count(answer.outcome === "stale"),
  rejectedOther: answers.rejectedOther + count(answer.outcome.startsWith("HTTP ")),
  unexpected: answers.unexpected + count(!answer.expected),
  eventIds: Option.match(answer.eventId, {
    onNone: () => answers.eventIds,
    onSome: (id) => HashSet.add(answers.eventIds, id)
  })
})

/** The report as a person reads it, under `heading`: this run's answers, then what the databases hold. */
export const formatReport = (r: DeliveryReport, heading = "Dostavka delivery report"): string => {
  const line = (label: string, n: number, note = "") =>
    `  ${label.padEnd(30)}${String(n).padStart(5)}${note ? `   ${note}` : ""}`
  return [
    heading,
    line("requests sent", r.requests),
    line("accepted (new)", r.accepted),
    line("accepted again (replay)", r.replayed, "same Idempotency-Key and body: same ids, nothing written"),
    line("rejected, stale revision 409", r.rejectedStale),
    line("rejected, other", r.rejectedOther),
    line("published (confirmed)", r.published, `outbox pending: ${r.pending}`),
    line(
      "catalog: applied",
      r.catalog.applied,
      `stale skipped ${r.catalog.stale}, duplicates suppressed ${r.catalog.duplicates}, entries ${r.catalog.entries}`
    ),
    line("audit: applied", r.audit.applied, `duplicates suppressed ${r.audit.duplicates}, records ${r.audit.records}`)
  ].join("\n")
}

/** Prints the report on stdout (`formatReport`). */
export const printReport = (r: DeliveryReport, heading?: string) => Console.log(formatReport(r, heading))
