/**
 * The handlers this kit runs. Each name is a handler's inbox key and the suffix of its
 * queues (`<prefix>.<handler>`, `.retry.<tier>`, `.dead`) and of its exchange (`.dlx`).
 */
export const HandlerNames = ["catalog", "audit"] as const
export type HandlerName = (typeof HandlerNames)[number]
