import { Layer } from "effect"
import { IdsRandom } from "../adapters/ids/IdsRandom.js"
import { MetricsExposition } from "../adapters/metrics/PrometheusExposition.js"
import { BrokerConnections } from "../ports/BrokerConnections.js"
import { OutboxSignal } from "../ports/OutboxSignal.js"
import { Readiness } from "../ports/Readiness.js"
import { Supervisor } from "../ports/Supervisor.js"

/**
 * What the roles of one process share: the `Supervisor` of their fate, the doorbell from
 * the API to the relay, the broker connections' states, the readiness checks, the metrics
 * exposition (its series labelled `service_name` = `serviceName`), and where new ids come
 * from. One of each per process; every role layer needs them.
 */
export const processServices = (serviceName: string) =>
  Layer.mergeAll(
    Supervisor.layer,
    OutboxSignal.layer,
    BrokerConnections.layer,
    Readiness.layer,
    MetricsExposition.live(serviceName),
    IdsRandom
  )

/** `processServices` of a process that names itself `dostavka` (the main job, the tests). */
export const ProcessServices = processServices("dostavka")
