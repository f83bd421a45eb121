import { Effect } from "effect"
// @ts-expect-error: the package ships no types; its output shape is declared below (prom2json's).
import parsePrometheusTextFormat from "parse-prometheus-text-format"

interface Sample {
  readonly labels?: Readonly<Record<string, string>>
  readonly value?: string
}
interface Family {
  readonly name: string
  readonly type: string
  readonly metrics: ReadonlyArray<Sample>
}

/** A scrape of `/metrics`, parsed by a real Prometheus text-format parser. */
export interface Scrape {
  readonly families: ReadonlyArray<Family>
  /** A counter's or gauge's value for exactly these labels (0 when absent). */
  readonly value: (name: string, labels?: Readonly<Record<string, string>>) => number
}

// Every series carries the process's service_name; a test names the kit's own labels only.
const matches = (sample: Sample, labels: Readonly<Record<string, string>>) => {
  const { service_name: _, ...own } = sample.labels ?? {}
  return Object.keys(own).length === Object.keys(labels).length &&
    Object.entries(labels).every(([k, v]) => own[k] === v)
}

/** Parses `text` (the Prometheus text exposition format); throws when it is not valid. */
export const parseScrape = (text: string): Scrape => {
  const families = parsePrometheusTextFormat(text) as ReadonlyArray<Family>
  const sample = (name: string, labels: Readonly<Record<string, string>>) =>
    families.find((f) => f.name === name)?.metrics.find((m) => matches(m, labels))
  return {
    families,
    value: (name, labels = {}) => Number(sample(name, labels)?.value ?? 0)
  }
}

/** GETs `<base>/metrics` and parses it; fails the test if the content type or the text is not Prometheus'. */
export const scrape = (base: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/metrics`)
    const type = response.headers.get("content-type") ?? ""
    if (!type.startsWith("text/plain")) throw new Error(`/metrics answered ${type}`)
    const text = await response.text()
    return { text, ...parseScrape(text) }
  })
